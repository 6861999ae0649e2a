#!/bin/sh
# init of the User-mode Linux guest (scripts/uml): mounts, the shaping modules, then the command in
# $LAGLAB_OUT/command from the repository (a hostfs mount), its exit status into $LAGLAB_OUT/rc.
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /repo /var/run/netns
mount -t hostfs none /repo -o "$LAGLAB_REPO"
for module in sch_netem sch_htb sch_tbf sch_ingress cls_u32 act_mirred ifb veth bridge br_netfilter \
    nf_tables nft_compat x_tables xt_NFQUEUE nfnetlink_queue xt_tcpudp xt_multiport xt_comment ip_tables iptable_filter \
    iptable_raw vxlan; do
  modprobe "$module" 2>/dev/null || echo "init: modprobe $module failed"
done
ip link set lo up
# What Docker's hosts have: bridged IPv4 passes iptables (the userspace backend holds packets there).
echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
# This UML kernel's nf_tables has no ipv4 tables (TABLE_ADD: Operation not supported); x_tables has
# everything the userspace backend uses (filter, NFQUEUE), so iptables here is the legacy one.
update-alternatives --set iptables /usr/sbin/iptables-legacy >/dev/null 2>&1
out=/repo/$LAGLAB_OUT
cd /repo/controller
export PYTHONPATH=/repo/controller HOME=/tmp PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
echo "init: $(uname -r), running: $(cat "$out/command")"
{ sh -c "$(cat "$out/command")"; echo $? >"$out/rc"; } 2>&1 | tee "$out/output.log"
sync
echo 1 >/proc/sys/kernel/sysrq
echo o >/proc/sysrq-trigger
sleep 10
