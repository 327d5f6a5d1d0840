//! Small safe wrappers over the libc calls the engines need: clocks, thread CPU time, CPU
//! affinity, socket options. Every `unsafe` block of the timing and pinning code lives here;
//! the calls the rest of daqtune makes too (euid, thread id, signals) are
//! `daqtune_probe::sys`'s, re-exported here for the engines.

use std::io;

pub use daqtune_probe::sys::{gettid, is_root};

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes into it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC in ns: the clock payload send stamps use (shared by both ends on one host).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time (user + system) the calling thread has used, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} beyond CPU_SETSIZE"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set. CPU_SET is bounds-checked above.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// CPUs this process may run on (its affinity mask), sorted.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: zeroed cpu_set_t is valid; sched_getaffinity writes at most size_of bytes.
    let (rc, set) = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let rc = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (rc, set)
    };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: i < CPU_SETSIZE, `set` is initialised.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect()
}

/// Makes the calling thread's sleeps end on time (the default 50 µs slack would make a paced
/// sender fall behind at high message rates).
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Whether the process has an effective uid of 0 (namespaces need CAP_SYS_ADMIN; root is the
/// common case and the check gives a clear message instead of an EPERM deep inside netlink).
/// This host's name for reports (empty when unreadable).
pub fn hostname() -> String {
    daqtune_probe::Host::live()
        .read_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Receives one datagram into `buf` and returns its real length, which is larger than
/// `buf.len()` when the datagram was cut (MSG_TRUNC): a receiver that fills exact-size slots
/// can still tell an oversized datagram from a good one.
pub fn recv_datagram(sock: &std::net::UdpSocket, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: `buf` is writable for `buf.len()` bytes; the kernel writes at most that many and
    // only reports the full length.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_TRUNC,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Sends `sig` to a child process (by its `std::process::Child::id`).
pub fn signal_child(child: &std::process::Child, sig: i32) -> io::Result<()> {
    daqtune_probe::sys::kill(child.id(), sig)
}

/// Asks for a socket buffer of `bytes` (SO_RCVBUF or SO_SNDBUF). The kernel caps it at
/// net.core.rmem_max / wmem_max, so the result reflects the host's tuning; returns the size
/// the kernel reports afterwards.
pub fn set_socket_buffer(fd: std::os::fd::RawFd, receive: bool, bytes: usize) -> io::Result<usize> {
    let opt = if receive {
        libc::SO_RCVBUF
    } else {
        libc::SO_SNDBUF
    };
    set_buffer_opt(fd, opt, opt, bytes)
}

/// Like [`set_socket_buffer`] for the receive side, but past net.core.rmem_max
/// (SO_RCVBUFFORCE, needs CAP_NET_ADMIN).
pub fn force_receive_buffer(fd: std::os::fd::RawFd, bytes: usize) -> io::Result<usize> {
    set_buffer_opt(fd, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, bytes)
}

fn set_buffer_opt(
    fd: std::os::fd::RawFd,
    opt: libc::c_int,
    read_opt: libc::c_int,
    bytes: usize,
) -> io::Result<usize> {
    let v: libc::c_int = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: v is a valid c_int for the duration of the call, its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = [0u32];
    socket_option_words(fd, libc::SOL_SOCKET, read_opt, &mut out)?;
    // The kernel's int, read as its bits.
    Ok((out[0] as i32).max(0) as usize)
}

/// A socket option the kernel fills as 32-bit words (an int, SO_MEMINFO's array,
/// PACKET_STATISTICS' struct of two counters): how many whole words it wrote into `out`.
pub fn socket_option_words(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    out: &mut [u32],
) -> io::Result<usize> {
    let mut len = std::mem::size_of_val(out) as libc::socklen_t;
    // SAFETY: out is writable for len bytes and len holds its size; the kernel writes at most
    // len bytes and says in len how many it wrote.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            opt,
            out.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len as usize / std::mem::size_of::<u32>())
}

/// SO_MEMINFO from asm-generic/socket.h (x86_64 and aarch64, the targets daqtune builds).
const SO_MEMINFO: libc::c_int = 55;
/// SK_MEMINFO_VARS in linux/sock_diag.h: the array SO_MEMINFO fills.
const SK_MEMINFO_VARS: usize = 9;

/// The receive queue's memory and its limit, bytes (SO_MEMINFO's SK_MEMINFO_RMEM_ALLOC and
/// SK_MEMINFO_RCVBUF): a UDP socket drops a datagram when the first would pass the second.
/// FIONREAD is no use here: on UDP it gives the size of the next datagram only.
pub fn receive_backlog(fd: std::os::fd::RawFd) -> io::Result<(u32, u32)> {
    let mut v = [0u32; SK_MEMINFO_VARS];
    if socket_option_words(fd, libc::SOL_SOCKET, SO_MEMINFO, &mut v)? < 2 {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
    Ok((v[0], v[1]))
}

/// Sets SO_RCVLOWAT: a blocked read (and the kernel's wake-up of the reader) waits until this
/// many bytes are queued, or the stream ends.
pub fn set_receive_low_water(fd: std::os::fd::RawFd, bytes: usize) -> io::Result<()> {
    let v: libc::c_int = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: v is a valid c_int for the duration of the call, its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat), used to tell
/// a live owner from a reused pid.
pub fn parse_stat_starttime(stat: &str) -> Option<u64> {
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

pub fn process_starttime(pid: u32) -> Option<u64> {
    let s = daqtune_probe::Host::live()
        .read_string(&format!("/proc/{pid}/stat"))
        .ok()?;
    parse_stat_starttime(&s)
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_oversized_datagram_reports_its_real_length() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        tx.send_to(&[7u8; 100], rx.local_addr().expect("addr"))
            .expect("send");
        let mut slot = [0u8; 10];
        assert_eq!(recv_datagram(&rx, &mut slot).expect("recv"), 100);
        assert_eq!(slot, [7u8; 10]);
    }

    use super::*;

    #[test]
    fn clocks_move() {
        let a = monotonic_ns();
        let mut x = 0u64;
        for i in 0..100_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(monotonic_ns() >= a);
        assert!(thread_cpu_ns() > 0);
        assert!(gettid() > 0);
    }

    #[test]
    fn affinity_lists_some_cpu() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        pin_current_thread(cpus[0]).expect("pin to an allowed cpu");
        assert_eq!(allowed_cpus(), vec![cpus[0]]);
        assert!(pin_current_thread(1 << 20).is_err());
    }

    /// The kernel says how many words it wrote: one for an int option, SO_MEMINFO's array in
    /// full, and never more than the buffer holds.
    #[test]
    fn socket_option_words_counts_what_the_kernel_wrote() {
        use std::os::fd::AsRawFd;
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp socket");
        let fd = sock.as_raw_fd();
        let set = set_socket_buffer(fd, true, 1 << 20).expect("SO_RCVBUF");
        let mut one = [0u32];
        assert_eq!(
            socket_option_words(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &mut one).expect("read"),
            1
        );
        assert_eq!(one[0] as usize, set);
        let mut two = [0u32; 2];
        match socket_option_words(fd, libc::SOL_SOCKET, SO_MEMINFO, &mut two) {
            Ok(2) => assert!(receive_backlog(fd).is_ok()),
            // qemu-user (the aarch64 leg) answers SO_MEMINFO with one int: too short, and
            // receive_backlog says so rather than reading a limit that is not there.
            Ok(n) => {
                assert!(n < 2, "{n} words in a 2-word buffer");
                assert!(receive_backlog(fd).is_err());
            }
            Err(e) => assert!(receive_backlog(fd).is_err(), "{e}"),
        }
    }

    #[test]
    fn starttime_parse() {
        let stat =
            "1234 (a b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat_starttime(stat), Some(987654));
        assert_eq!(parse_stat_starttime(""), None);
        assert_eq!(parse_stat_starttime("garbage"), None);
        assert_eq!(parse_stat_starttime("1 (x) S 1 2"), None);
        assert!(process_starttime(std::process::id()).is_some());
    }
}
