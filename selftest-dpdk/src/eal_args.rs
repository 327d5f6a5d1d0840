//! The EAL argument list, built by a pure function so both topologies (af_packet vdevs on a
//! veth pair, ConnectX ports by PCI address) are unit-tested without DPDK.

use std::fmt;

/// Ethernet + IPv4 + UDP headers in front of each self-test message.
pub const L2_L4_HEADERS: usize = 14 + 20 + 8;
/// Ethernet header + FCS: what DPDK adds on top of the MTU to get the frame length.
pub const ETHER_OVERHEAD: usize = 14 + 4;
/// Largest message that still fits a 9000-byte MTU frame.
pub const MAX_JUMBO_FRAME: usize = 9018;
/// `TPACKET2_HDRLEN` rounded to `TPACKET_ALIGNMENT` plus `sockaddr_ll`: what af_packet places in
/// each ring frame before the packet data (DPDK's af_packet PMD checks the packet against
/// `framesz - TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`).
pub const TPACKET_OVERHEAD: usize = 32 + 20 + 16 + 64;

/// Where the two ports of a run come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ports {
    /// Two af_packet vdevs on the two ends of a veth pair (CI, laptops).
    Veth { tx_iface: String, rx_iface: String },
    /// Physical ports by PCI address (mlx5 is bifurcated: the kernel driver stays bound).
    /// The same address twice means one port cabled to itself (or a loopback plug).
    Pci { tx_bdf: String, rx_bdf: String },
}

/// Ring geometry handed to the af_packet PMD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfPacketRing {
    pub blocksz: usize,
    pub framesz: usize,
    pub framecnt: usize,
}

/// Everything the argument list depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct EalPlan {
    pub file_prefix: String,
    /// CPU of the main lcore (control, statistics); may equal a data CPU on small hosts.
    pub main_cpu: usize,
    pub tx_cpu: usize,
    pub rx_cpu: usize,
    pub ports: Ports,
    /// Largest frame the run sends (Ethernet header to payload end, no FCS).
    pub frame_len: usize,
    /// Use memfd-backed memory and no shared files (`--in-memory`).
    pub in_memory: bool,
    /// EAL log level (`--log-level`), e.g. `notice`.
    pub log_level: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    BadBdf(String),
    BadIface(String),
    BadPrefix(String),
    FrameTooLarge(usize),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::BadBdf(s) => write!(
                f,
                "{s:?} is not a PCI address (expected DDDD:BB:DD.F, e.g. 0000:01:00.0)"
            ),
            ArgError::BadIface(s) => write!(f, "{s:?} is not a valid interface name"),
            ArgError::BadPrefix(s) => write!(f, "{s:?} is not a usable --file-prefix"),
            ArgError::FrameTooLarge(n) => write!(
                f,
                "frame of {n} bytes exceeds the {MAX_JUMBO_FRAME}-byte jumbo frame"
            ),
        }
    }
}

impl std::error::Error for ArgError {}

/// Accepts `DDDD:BB:DD.F` (domain of 4 or 8 hex digits) and the short `BB:DD.F`; returns the
/// canonical lowercase form with a domain.
pub fn normalize_bdf(s: &str) -> Result<String, ArgError> {
    let bad = || ArgError::BadBdf(s.to_string());
    let parts: Vec<&str> = s.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [d, b, df] => (*d, *b, *df),
        [b, df] => ("0000", *b, *df),
        _ => return Err(bad()),
    };
    let (dev, func) = devfn.split_once('.').ok_or_else(bad)?;
    let hex = |t: &str, min: usize, max: usize| {
        t.len() >= min && t.len() <= max && t.chars().all(|c| c.is_ascii_hexdigit())
    };
    if !(hex(domain, 4, 8) && hex(bus, 2, 2) && hex(dev, 2, 2) && func.len() == 1) {
        return Err(bad());
    }
    let dev_n = u8::from_str_radix(dev, 16).map_err(|_| bad())?;
    let func_n = u8::from_str_radix(func, 16).map_err(|_| bad())?;
    if dev_n > 0x1f || func_n > 7 {
        return Err(bad());
    }
    Ok(format!(
        "{}:{}:{}.{}",
        domain.to_ascii_lowercase(),
        bus.to_ascii_lowercase(),
        dev.to_ascii_lowercase(),
        func
    ))
}

/// Interface names as the kernel accepts them (IFNAMSIZ 16 incl. NUL, no '/', ':', ',' or
/// whitespace); ',' and '=' are refused too because they would split the vdev devargs.
pub fn valid_iface(s: &str) -> bool {
    !s.is_empty()
        && s.len() < 16
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'/' | b':' | b',' | b'='))
}

fn valid_prefix(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A file prefix nobody else uses: DPDK keys its runtime directory, shared config and hugepage
/// map files on it, so two concurrent runs (or a run next to an application) must differ.
pub fn unique_file_prefix(pid: u32, nonce: u64) -> String {
    format!("daqtune-{pid}-{nonce:x}")
}

/// The MTU a port needs to carry `frame_len`-byte frames (Ethernet header excluded, as DPDK
/// and the kernel count it).
pub fn mtu_for_frame(frame_len: usize) -> u16 {
    let mtu = frame_len.saturating_sub(14).max(68);
    u16::try_from(mtu).unwrap_or(u16::MAX)
}

/// Frame length for a self-test message of `message_len` bytes.
pub fn frame_for_message(message_len: usize) -> usize {
    message_len + L2_L4_HEADERS
}

/// af_packet ring geometry for frames up to `frame_len`: one ring frame must hold the tpacket
/// header plus the whole packet (frames are sized to the packet, so small packets get many
/// slots), and a block must be a power-of-two number of pages holding a whole number of frames.
/// About 32 MiB per ring absorbs scheduling gaps of a fraction of a second at a few hundred
/// thousand packets per second on shared cores (131072 slots of 256 bytes for 64-byte
/// messages).
pub fn af_packet_ring(frame_len: usize) -> AfPacketRing {
    af_packet_ring_for_page(frame_len, page_size())
}

/// The base page of the running kernel: 4 KiB on x86-64, 4, 16 or 64 KiB on arm64 (Grace-class
/// kernels run 64 KiB pages, where a 4 KiB block makes the kernel refuse the ring).
fn page_size() -> usize {
    // SAFETY: sysconf takes no pointer and only reads a constant of the process.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p)
        .ok()
        .filter(|&p| p >= 4096)
        .unwrap_or(4096)
}

/// [`af_packet_ring`] for a kernel whose pages are `page` bytes (a power of two).
pub fn af_packet_ring_for_page(frame_len: usize, page: usize) -> AfPacketRing {
    let need = frame_len + TPACKET_OVERHEAD;
    let framesz = need.next_power_of_two().max(256);
    let blocksz = framesz.max(page);
    let framecnt = ((32usize << 20) / framesz).max(1024);
    AfPacketRing {
        blocksz,
        framesz,
        framecnt,
    }
}

/// The full argument vector for `rte_eal_init`, program name first.
pub fn eal_args(plan: &EalPlan) -> Result<Vec<String>, ArgError> {
    if !valid_prefix(&plan.file_prefix) {
        return Err(ArgError::BadPrefix(plan.file_prefix.clone()));
    }
    if plan.frame_len > MAX_JUMBO_FRAME {
        return Err(ArgError::FrameTooLarge(plan.frame_len));
    }
    // Lcore ids are fixed (0 main, 1 TX, 2 RX) and mapped onto CPUs with '@', which lets the
    // main lcore share a CPU with a data lcore on a two-core host.
    let mut a = vec![
        "daqtune-dpdk".to_string(),
        format!(
            "--lcores=0@{},1@{},2@{}",
            plan.main_cpu, plan.tx_cpu, plan.rx_cpu
        ),
        format!("--file-prefix={}", plan.file_prefix),
        "--iova-mode=va".to_string(),
        // Telemetry would leave a socket in the runtime directory.
        "--no-telemetry".to_string(),
        format!("--log-level={}", plan.log_level),
    ];
    if plan.in_memory {
        a.push("--in-memory".to_string());
    }
    match &plan.ports {
        Ports::Veth { tx_iface, rx_iface } => {
            for i in [tx_iface, rx_iface] {
                if !valid_iface(i) {
                    return Err(ArgError::BadIface(i.clone()));
                }
            }
            // qdisc_bypass: the sender's frames skip the qdisc layer and with it the copy every
            // packet socket on the sending interface (our own RX ring of that port) would get.
            // Never probe the host's PCI devices in the veth topology: a bifurcated mlx5 port
            // would otherwise be taken over by this run.
            a.push("--no-pci".to_string());
            let r = af_packet_ring(plan.frame_len);
            for (n, iface) in [tx_iface, rx_iface].into_iter().enumerate() {
                a.push(format!(
                    "--vdev=net_af_packet{n},iface={iface},qpairs=1,qdisc_bypass=1,blocksz={},framesz={},framecnt={}",
                    r.blocksz, r.framesz, r.framecnt
                ));
            }
        }
        Ports::Pci { tx_bdf, rx_bdf } => {
            let tx = normalize_bdf(tx_bdf)?;
            let rx = normalize_bdf(rx_bdf)?;
            // Only the named functions are probed (allow list); without it EAL would take
            // every ConnectX port on the host.
            a.push(format!("--allow={tx}"));
            if rx != tx {
                a.push(format!("--allow={rx}"));
            }
        }
    }
    Ok(a)
}

/// The ethdev names DPDK gives the ports of `ports` (for `rte_eth_dev_get_port_by_name`).
pub fn port_names(ports: &Ports) -> Result<(String, String), ArgError> {
    match ports {
        Ports::Veth { .. } => Ok(("net_af_packet0".into(), "net_af_packet1".into())),
        Ports::Pci { tx_bdf, rx_bdf } => Ok((normalize_bdf(tx_bdf)?, normalize_bdf(rx_bdf)?)),
    }
}

/// The kernel netdev behind each of `ports` (sending, receiving), whose drop and error
/// counters the run records before and after (issue 45): the veth ends the af_packet vdevs sit
/// on; a PCI function's netdev when its kernel driver stays bound (mlx5 is bifurcated); else
/// why there is none (a function bound to vfio-pci has no netdev: its counters are DPDK's own,
/// `dpdk.ports[].xstats`).
pub fn port_netdevs(host: &daqtune_probe::Host, ports: &Ports) -> [Result<String, String>; 2] {
    match ports {
        Ports::Veth { tx_iface, rx_iface } => [Ok(tx_iface.clone()), Ok(rx_iface.clone())],
        Ports::Pci { tx_bdf, rx_bdf } => [pci_netdev(host, tx_bdf), pci_netdev(host, rx_bdf)],
    }
}

fn pci_netdev(host: &daqtune_probe::Host, bdf: &str) -> Result<String, String> {
    let bdf = normalize_bdf(bdf).map_err(|e| e.to_string())?;
    let dev = format!("/sys/bus/pci/devices/{bdf}");
    let mut names = host.read_dir(&format!("{dev}/net")).unwrap_or_default();
    names.sort();
    if let Some(n) = names.into_iter().next() {
        return Ok(n);
    }
    let driver = host
        .read_link(&format!("{dev}/driver"))
        .ok()
        .and_then(|p| p.rsplit('/').next().map(str::to_string))
        .filter(|d| !d.is_empty());
    Err(match driver {
        Some(d) => format!(
            "{bdf} is bound to {d}, which gives the kernel no netdev: its counters are DPDK's own (dpdk.ports[].xstats)"
        ),
        None => format!("{bdf} has no netdev and no driver bound"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(ports: Ports) -> EalPlan {
        EalPlan {
            file_prefix: unique_file_prefix(1234, 0xabc),
            main_cpu: 0,
            tx_cpu: 0,
            rx_cpu: 1,
            ports,
            frame_len: 1042,
            in_memory: true,
            log_level: "notice".into(),
        }
    }

    #[test]
    fn veth_args() {
        let a = eal_args(&plan(Ports::Veth {
            tx_iface: "dqt0".into(),
            rx_iface: "dqt1".into(),
        }))
        .expect("valid plan");
        assert_eq!(
            a,
            vec![
                "daqtune-dpdk",
                "--lcores=0@0,1@0,2@1",
                "--file-prefix=daqtune-1234-abc",
                "--iova-mode=va",
                "--no-telemetry",
                "--log-level=notice",
                "--in-memory",
                "--no-pci",
                &format!("--vdev=net_af_packet0,iface=dqt0,qpairs=1,qdisc_bypass=1,blocksz={},framesz=2048,framecnt=16384", page_size()),
                &format!("--vdev=net_af_packet1,iface=dqt1,qpairs=1,qdisc_bypass=1,blocksz={},framesz=2048,framecnt=16384", page_size()),
            ]
        );
    }

    #[test]
    fn mlx5_args_allow_only_named_ports() {
        let mut p = plan(Ports::Pci {
            tx_bdf: "0000:01:00.0".into(),
            rx_bdf: "01:00.1".into(),
        });
        p.main_cpu = 8;
        p.tx_cpu = 9;
        p.rx_cpu = 10;
        p.in_memory = false;
        let a = eal_args(&p).expect("valid plan");
        assert_eq!(
            a,
            vec![
                "daqtune-dpdk",
                "--lcores=0@8,1@9,2@10",
                "--file-prefix=daqtune-1234-abc",
                "--iova-mode=va",
                "--no-telemetry",
                "--log-level=notice",
                "--allow=0000:01:00.0",
                "--allow=0000:01:00.1",
            ]
        );
        assert!(!a.iter().any(|x| x.starts_with("--vdev") || x == "--no-pci"));
    }

    #[test]
    fn same_port_twice_is_allowed_once() {
        let a = eal_args(&plan(Ports::Pci {
            tx_bdf: "0000:81:00.0".into(),
            rx_bdf: "0000:81:00.0".into(),
        }))
        .expect("valid");
        assert_eq!(a.iter().filter(|x| x.starts_with("--allow")).count(), 1);
    }

    #[test]
    fn bad_inputs_are_refused() {
        for bdf in [
            "",
            "0000:01:00",
            "0000:01:00.8",
            "0000:01:20.0",
            "zz:00.0",
            "0000:01:00.0,x=1",
        ] {
            let r = eal_args(&plan(Ports::Pci {
                tx_bdf: bdf.into(),
                rx_bdf: "0000:01:00.0".into(),
            }));
            assert!(matches!(r, Err(ArgError::BadBdf(_))), "{bdf:?} accepted");
        }
        for iface in ["", "a,b", "x=y", "toolonginterface0", "a/b", "a b"] {
            let r = eal_args(&plan(Ports::Veth {
                tx_iface: iface.into(),
                rx_iface: "dqt1".into(),
            }));
            assert!(
                matches!(r, Err(ArgError::BadIface(_))),
                "{iface:?} accepted"
            );
        }
        let mut p = plan(Ports::Veth {
            tx_iface: "a".into(),
            rx_iface: "b".into(),
        });
        p.file_prefix = "../x".into();
        assert!(matches!(eal_args(&p), Err(ArgError::BadPrefix(_))));
        p.file_prefix = "ok".into();
        p.frame_len = 9019;
        assert!(matches!(eal_args(&p), Err(ArgError::FrameTooLarge(9019))));
    }

    #[test]
    fn bdf_normalization() {
        assert_eq!(normalize_bdf("0000:AF:00.1").as_deref(), Ok("0000:af:00.1"));
        assert_eq!(normalize_bdf("af:1f.7").as_deref(), Ok("0000:af:1f.7"));
        assert_eq!(
            normalize_bdf("10000:01:00.0").as_deref(),
            Ok("10000:01:00.0")
        );
    }

    #[test]
    fn ring_fits_jumbo_frames() {
        for frame in [60usize, 64, 1042, 1514, 2048, 4000, 9018] {
            let r = af_packet_ring(frame);
            assert!(r.framesz >= frame + TPACKET_OVERHEAD, "{frame}: {r:?}");
            assert_eq!(r.framesz % 16, 0);
            assert_eq!(r.blocksz % page_size(), 0);
            assert_eq!(r.blocksz % r.framesz, 0);
            assert!(r.framecnt >= 1024);
            assert!(r.framecnt * r.framesz <= 32 << 20);
        }
        let small = af_packet_ring(frame_for_message(64));
        assert_eq!(
            (small.framesz, small.blocksz, small.framecnt),
            (256, page_size(), 131072)
        );
        let j = af_packet_ring(9018);
        assert_eq!((j.framesz, j.blocksz, j.framecnt), (16384, 16384, 2048));
        // 64 KiB pages (arm64 Grace-class kernels): a block is at least one page.
        for frame in [64usize, 1514, 9018] {
            let r = af_packet_ring_for_page(frame, 65536);
            assert_eq!(r.blocksz, 65536, "{frame}: {r:?}");
            assert_eq!(r.blocksz % r.framesz, 0);
        }
    }

    /// The netdev of a bifurcated port (mlx5_core keeps it) or why none (vfio-pci), read from
    /// a host root laid out as sysfs has it (/sys/bus/pci/devices/BDF/net/NAME, the `driver`
    /// link into /sys/bus/pci/drivers).
    #[test]
    fn netdevs_of_the_ports() {
        let root = tempfile::tempdir().expect("tempdir");
        let pci = root.path().join("sys/bus/pci/devices");
        std::fs::create_dir_all(pci.join("0000:01:00.0/net/enp1s0f0np0")).expect("mkdir");
        std::fs::create_dir_all(pci.join("0000:01:00.1")).expect("mkdir");
        std::os::unix::fs::symlink(
            "../../../bus/pci/drivers/vfio-pci",
            pci.join("0000:01:00.1/driver"),
        )
        .expect("link");
        let host = daqtune_probe::Host::at(root.path()).expect("host");
        let [tx, rx] = port_netdevs(
            &host,
            &Ports::Pci {
                tx_bdf: "01:00.0".into(),
                rx_bdf: "0000:01:00.1".into(),
            },
        );
        assert_eq!(tx.as_deref(), Ok("enp1s0f0np0"));
        let why = rx.expect_err("vfio-pci gives no netdev");
        assert!(why.contains("0000:01:00.1 is bound to vfio-pci"), "{why}");
        let [tx, rx] = port_netdevs(
            &host,
            &Ports::Veth {
                tx_iface: "dqt0".into(),
                rx_iface: "dqt1".into(),
            },
        );
        assert_eq!((tx.as_deref(), rx.as_deref()), (Ok("dqt0"), Ok("dqt1")));
    }

    #[test]
    fn mtu_from_frame() {
        assert_eq!(mtu_for_frame(9014), 9000);
        assert_eq!(mtu_for_frame(1514), 1500);
        assert_eq!(mtu_for_frame(frame_for_message(1000)), 1028);
        assert_eq!(mtu_for_frame(10), 68);
    }

    proptest::proptest! {
        #[test]
        fn bdf_never_panics(s in "\\PC{0,20}") {
            let _ = normalize_bdf(&s);
        }
    }
}
