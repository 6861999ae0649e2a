# Rendered by laglab for the dtle-dst agent (client only).
name       = "dtle-dst"
datacenter = "dc1"
data_dir   = "/dtle/var/lib/nomad"
plugin_dir = "/dtle/usr/share/dtle/nomad-plugin"
bind_addr  = "0.0.0.0"
log_level  = "Info"
log_file   = "/dtle/var/log/nomad/"
disable_update_check = true

ports {
  http = 4646
  rpc  = 4647
  serf = 4648
}
advertise {
  http = "dtle-dst:4646"
  rpc  = "dtle-dst:4647"
  serf = "dtle-dst:4648"
}

server {
  enabled = false
}

client {
  enabled = true
  options = {
    "driver.blacklist" = "docker,exec,java,mock,qemu,rawexec,rkt"
  }
}

consul {
  address = "consul:8500"
}

plugin "dtle" {
  config {
    data_dir        = "/dtle/var/lib/nomad"
    nats_bind       = "0.0.0.0:8193"
    nats_advertise  = "dtle-dst:8193"
    consul          = "consul:8500"
    api_addr        = "0.0.0.0:8190"
    nomad_addr      = "dtle-dst:4646"
    publish_metrics = true
    stats_collection_interval = 5
  }
}
