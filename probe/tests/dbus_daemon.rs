//! The D-Bus client against the reference bus daemon: a private `dbus-daemon` per test, on a
//! socket in the test's own temp dir (never the host's buses).

use daqtune_probe::dbus::{Connection, DbusError, Message, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Daemon {
    child: Child,
    sock: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start a bus daemon, or `None` when dbus-daemon is not installed (scripts/test-all.sh
/// installs it as root; the reason is printed).
fn daemon() -> Option<Daemon> {
    let dir = tempfile::tempdir().expect("tmp");
    let sock = dir.path().join("bus");
    let conf = dir.path().join("bus.conf");
    std::fs::write(
        &conf,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
    <allow own="*"/>
    <allow user="*"/>
  </policy>
</busconfig>
"#,
            sock.display()
        ),
    )
    .expect("conf");
    let mut child = match Command::new("dbus-daemon")
        .arg(format!("--config-file={}", conf.display()))
        .args(["--nofork", "--nopidfile", "--print-address=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("SKIP: dbus-daemon not runnable ({e}); apt-get install dbus-daemon");
            return None;
        }
    };
    // The daemon prints its address once it listens: no polling, no sleeps.
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .expect("address line");
    assert!(line.contains("unix:path="), "{line}");
    Some(Daemon {
        child,
        sock,
        _dir: dir,
    })
}

#[test]
fn talks_to_the_reference_bus_daemon() {
    let Some(d) = daemon() else { return };
    let mut c = Connection::open(&d.sock, true, Duration::from_secs(10)).expect("connect + Hello");
    let id = c
        .call(Message::method_call(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "GetId",
            vec![],
        ))
        .expect("GetId");
    let id = id.body.first().and_then(Value::as_str).expect("a string");
    assert_eq!(id.len(), 32, "{id}");
    let names = c
        .call(Message::method_call(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "ListNames",
            vec![],
        ))
        .expect("ListNames");
    match names.body.first() {
        Some(Value::Array(sig, items)) => {
            assert_eq!(sig, "s");
            assert!(items
                .iter()
                .any(|v| v.as_str() == Some("org.freedesktop.DBus")));
        }
        other => panic!("ListNames returned {other:?}"),
    }
    // Properties of the bus itself: an a{sv} with arrays inside, as systemd's replies have.
    let props = c
        .call(Message::method_call(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.Properties",
            "GetAll",
            vec![Value::Str("org.freedesktop.DBus".into())],
        ))
        .expect("GetAll");
    let p = daqtune_probe::systemd::properties(&props.body);
    assert!(p.iter().any(|(k, _)| k == "Features"), "{p:?}");
    // An error reply is an error with the peer's name and text.
    match c.call(Message::method_call(
        Some("org.freedesktop.DBus"),
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "NoSuchMethod",
        vec![],
    )) {
        Err(DbusError::Remote { name, .. }) => {
            assert_eq!(name, "org.freedesktop.DBus.Error.UnknownMethod")
        }
        other => panic!("expected an error reply, got {other:?}"),
    }
}

#[test]
fn a_socket_nobody_listens_on_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tmp");
    match Connection::open(&dir.path().join("none"), true, Duration::from_secs(1)) {
        Err(DbusError::Connect { path, .. }) => assert!(path.ends_with("none")),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("connected to nothing"),
    }
}
