//! What systemd says about a unit, asked over D-Bus (no `systemctl`).
//!
//! Root talks to systemd's private socket (`/run/systemd/private`, no bus daemon needed, as on
//! a minimal Debian install); others go through the system bus, where reading unit properties
//! needs no privilege. A host without systemd, or a container without its sockets, gives a
//! clear error that callers report as `skip`.

use crate::dbus::{Connection, DbusError, Message, Value};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

const DEST: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
const PROPS: &str = "org.freedesktop.DBus.Properties";
/// A property read of a healthy systemd takes milliseconds; a hung one must not hang `check`.
/// Only a hang guard, generous for emulated and overloaded hosts (a guest under TCG on a busy
/// runner answers in tenths of a second). After one timeout the connection refuses further
/// questions, so a hung systemd costs this once per run. (The unanswered calls first seen
/// against this limit were the client's doing: see `Connection::authenticate`.)
const TIMEOUT: Duration = Duration::from_secs(15);

/// The state of one unit, as `systemctl show` would print it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitState {
    pub name: String,
    /// `loaded`, `not-found`, `bad-setting`, `error`, `masked`.
    pub load_state: String,
    /// `active`, `inactive`, `failed`, `activating`, ...
    pub active_state: String,
    pub sub_state: String,
    /// `enabled`, `disabled`, `static`, ... (empty for transient units).
    pub unit_file_state: String,
    /// The last run's result (`success`, `exit-code`, `signal`, `timeout`, ...), for unit types
    /// that have one (service, mount, timer, socket, path, swap, scope).
    pub result: Option<String>,
    /// A service's main process exit status.
    pub exec_main_status: Option<i32>,
}

impl UnitState {
    /// The last run failed (what `systemctl --failed` lists, plus a failed result of a unit
    /// that has since gone inactive).
    pub fn failed(&self) -> bool {
        self.active_state == "failed" || self.result.as_deref().is_some_and(|r| r != "success")
    }
}

/// A connection to systemd.
pub struct Systemd {
    conn: Connection,
    /// Through a bus (needs a destination) rather than the private socket.
    bus: bool,
}

impl Systemd {
    /// Connect: the private socket when root, else the system bus.
    pub fn connect() -> Result<Systemd, DbusError> {
        let root = crate::sys::is_root();
        let private = Path::new("/run/systemd/private");
        if root && private.exists() {
            if let Ok(conn) = Connection::open(private, false, TIMEOUT) {
                return Ok(Systemd { conn, bus: false });
            }
        }
        let bus = crate::dbus::system_bus_path();
        let conn = Connection::open(Path::new(&bus), true, TIMEOUT)?;
        Ok(Systemd { conn, bus: true })
    }

    fn call(
        &mut self,
        path: &str,
        iface: &str,
        member: &str,
        args: Vec<Value>,
    ) -> Result<Message, DbusError> {
        let dest = self.bus.then_some(DEST);
        self.conn
            .call(Message::method_call(dest, path, iface, member, args))
    }

    /// The object path of a unit, loading its file if systemd has not yet (a unit that does
    /// not exist comes back with load state `not-found`).
    fn unit_path(&mut self, name: &str) -> Result<String, DbusError> {
        let r = match self.call(
            MANAGER_PATH,
            MANAGER,
            "GetUnit",
            vec![Value::Str(name.into())],
        ) {
            Ok(r) => r,
            Err(DbusError::Remote { name: e, .. }) if e.ends_with("NoSuchUnit") => self.call(
                MANAGER_PATH,
                MANAGER,
                "LoadUnit",
                vec![Value::Str(name.into())],
            )?,
            Err(e) => return Err(e),
        };
        r.body
            .first()
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| DbusError::Malformed("GetUnit returned no object path".into()))
    }

    fn all_properties(
        &mut self,
        path: &str,
        iface: &str,
    ) -> Result<Vec<(String, Value)>, DbusError> {
        let r = self.call(path, PROPS, "GetAll", vec![Value::Str(iface.into())])?;
        Ok(properties(&r.body))
    }

    /// The state of `name` (e.g. `daqtune-governor.service`).
    pub fn unit(&mut self, name: &str) -> Result<UnitState, DbusError> {
        let path = self.unit_path(name)?;
        let unit = self.all_properties(&path, "org.freedesktop.systemd1.Unit")?;
        let text = |props: &[(String, Value)], k: &str| {
            props
                .iter()
                .find(|(n, _)| n == k)
                .and_then(|(_, v)| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let mut st = UnitState {
            name: name.to_string(),
            load_state: text(&unit, "LoadState"),
            active_state: text(&unit, "ActiveState"),
            sub_state: text(&unit, "SubState"),
            unit_file_state: text(&unit, "UnitFileState"),
            ..UnitState::default()
        };
        let kind = match name.rsplit_once('.').map(|(_, k)| k) {
            Some("service") => Some("Service"),
            Some("mount") => Some("Mount"),
            Some("timer") => Some("Timer"),
            Some("socket") => Some("Socket"),
            Some("path") => Some("Path"),
            Some("swap") => Some("Swap"),
            _ => None,
        };
        if let (Some(kind), "loaded") = (kind, st.load_state.as_str()) {
            let props = self.all_properties(&path, &format!("org.freedesktop.systemd1.{kind}"))?;
            st.result = props
                .iter()
                .find(|(n, _)| n == "Result")
                .and_then(|(_, v)| v.as_str())
                .map(str::to_string);
            st.exec_main_status = props
                .iter()
                .find(|(n, _)| n == "ExecMainStatus")
                .and_then(|(_, v)| v.as_i64())
                .and_then(|v| i32::try_from(v).ok());
        }
        Ok(st)
    }
}

/// The `a{sv}` of a GetAll reply as (name, value) pairs.
pub fn properties(body: &[Value]) -> Vec<(String, Value)> {
    let Some(Value::Array(_, items)) = body.first() else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|e| match e {
            Value::Entry(k, v) => Some((k.as_str()?.to_string(), (**v).clone())),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_means_failed_state_or_a_bad_result() {
        let mut u = UnitState {
            active_state: "inactive".into(),
            result: Some("success".into()),
            ..UnitState::default()
        };
        assert!(!u.failed());
        u.result = Some("exit-code".into());
        assert!(u.failed(), "a oneshot that failed and went inactive");
        u.result = None;
        u.active_state = "failed".into();
        assert!(u.failed());
    }

    #[test]
    fn properties_of_a_get_all_body() {
        let body = vec![Value::Array(
            "{sv}".into(),
            vec![
                Value::Entry(
                    Box::new(Value::Str("ActiveState".into())),
                    Box::new(Value::Variant(Box::new(Value::Str("failed".into())))),
                ),
                Value::Entry(
                    Box::new(Value::Str("ExecMainStatus".into())),
                    Box::new(Value::Variant(Box::new(Value::I32(203)))),
                ),
            ],
        )];
        let p = properties(&body);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].1.as_str(), Some("failed"));
        assert_eq!(p[1].1.as_i64(), Some(203));
        assert!(properties(&[]).is_empty());
        assert!(properties(&[Value::U32(1)]).is_empty());
    }
}
