/* Preloaded into User-mode Linux (scripts/uml): its ptrace calls for the XSTATE register set fail,
 * so it saves and restores its guests' FPU state with PTRACE_GETFPXREGS / PTRACE_SETFPXREGS (x87 and
 * SSE) instead.
 *
 * Why: Debian's UML 6.1 (and 6.12) restores XSTATE with a buffer the size of an AVX2 host's, and a
 * host kernel refuses any other size than its own; on a CPU with AVX-512 or AMX every restore fails
 * and the guest's init dies at once ("ptrace set fp regs failed, errno = 14", "Attempted to kill
 * init! exitcode=0x0000000b"). UML 7.2 has that fixed but no iptables for IPv4 at all, which the
 * userspace backend needs. The x87/SSE path keeps no AVX registers, so the guest runs with glibc's
 * AVX code paths off (GLIBC_TUNABLES on the kernel command line, scripts/uml): nothing in the guest
 * then has AVX state to lose.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/ptrace.h>
#include <sys/types.h>

#define NT_X86_XSTATE 0x202

long ptrace(enum __ptrace_request request, ...)
{
	static long (*real)(enum __ptrace_request, pid_t, void *, void *);
	va_list ap;
	pid_t pid;
	void *addr, *data;

	va_start(ap, request);
	pid = va_arg(ap, pid_t);
	addr = va_arg(ap, void *);
	data = va_arg(ap, void *);
	va_end(ap);
	if ((request == PTRACE_GETREGSET || request == PTRACE_SETREGSET) && (long)addr == NT_X86_XSTATE) {
		errno = EIO;
		return -1;
	}
	if (!real)
		real = (long (*)(enum __ptrace_request, pid_t, void *, void *))dlsym(RTLD_NEXT, "ptrace");
	return real(request, pid, addr, data);
}
