//! A small D-Bus client: enough to ask systemd about a unit without `systemctl`.
//!
//! The wire format (D-Bus specification, "Message Protocol"): a 16-byte fixed header (byte
//! order, type, flags, version, body length, serial), an array of header fields `a(yv)`
//! padded to 8 bytes, then the body, every value aligned to its own size from the start of
//! the message. Only little-endian messages are written; both byte orders are read.
//!
//! Parsing takes bytes ([`Message::parse`]) and never trusts a length: every length is checked
//! against what is left, nesting is bounded, and a message larger than [`MAX_MESSAGE`] is
//! refused. The transport ([`Connection`]) is a Unix socket with SASL EXTERNAL authentication
//! and a read timeout, so a hung bus makes a clear error, never a hang.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Largest message read. The replies daqtune asks for are a few KiB; the protocol allows
/// 128 MiB, which is no size to buffer for a property read.
pub const MAX_MESSAGE: usize = 4 << 20;
/// The specification's nesting limit for containers (32 arrays + 32 structs).
const MAX_DEPTH: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum DbusError {
    #[error("cannot connect to {path}: {source}")]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error("D-Bus I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The peer did not answer within the connection's timeout.
    #[error("no answer within {0:?} (the peer is hung or starved of CPU)")]
    Timeout(std::time::Duration),
    /// An earlier exchange on this connection failed part-way (a timeout, a broken pipe): the
    /// stream may hold the rest of a late reply, so nothing more is asked on it.
    #[error("not asked: an earlier query on this connection failed ({0})")]
    Unusable(String),
    #[error("D-Bus authentication refused: {0}")]
    Auth(String),
    #[error("malformed D-Bus message: {0}")]
    Malformed(String),
    /// The peer answered with an error message.
    #[error("{name}: {message}")]
    Remote { name: String, message: String },
}

fn malformed(s: impl Into<String>) -> DbusError {
    DbusError::Malformed(s.into())
}

/// A D-Bus value. `s`, `o` and `g` are all strings here.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Byte(u8),
    Bool(bool),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    Double(f64),
    /// `s`.
    Str(String),
    /// `o`.
    Path(String),
    /// `g`.
    Signature(String),
    /// `h`: an index into the message's file descriptors (never used here).
    Fd(u32),
    /// `a...`: element signature and elements.
    Array(String, Vec<Value>),
    Struct(Vec<Value>),
    /// `{kv}` inside an array.
    Entry(Box<Value>, Box<Value>),
    Variant(Box<Value>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) | Value::Path(s) | Value::Signature(s) => Some(s),
            Value::Variant(v) => v.as_str(),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Byte(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::Variant(ref v) => v.as_i64(),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Variant(v) => v.as_bool(),
            _ => None,
        }
    }

    /// The signature of this value.
    pub fn signature(&self) -> String {
        match self {
            Value::Byte(_) => "y".into(),
            Value::Bool(_) => "b".into(),
            Value::I16(_) => "n".into(),
            Value::U16(_) => "q".into(),
            Value::I32(_) => "i".into(),
            Value::U32(_) => "u".into(),
            Value::I64(_) => "x".into(),
            Value::U64(_) => "t".into(),
            Value::Double(_) => "d".into(),
            Value::Str(_) => "s".into(),
            Value::Path(_) => "o".into(),
            Value::Signature(_) => "g".into(),
            Value::Fd(_) => "h".into(),
            Value::Array(elem, _) => format!("a{elem}"),
            Value::Struct(v) => format!("({})", v.iter().map(Value::signature).collect::<String>()),
            Value::Entry(k, v) => format!("{{{}{}}}", k.signature(), v.signature()),
            Value::Variant(_) => "v".into(),
        }
    }
}

/// One complete type of a signature.
#[derive(Debug, Clone, PartialEq)]
enum Type {
    Basic(u8),
    Array(Box<Type>),
    Struct(Vec<Type>),
    Entry(Box<Type>, Box<Type>),
    Variant,
}

impl Type {
    fn alignment(&self) -> usize {
        match self {
            Type::Basic(b'y' | b'g') | Type::Variant => 1,
            Type::Basic(b'n' | b'q') => 2,
            Type::Basic(b'x' | b't' | b'd') | Type::Struct(_) | Type::Entry(..) => 8,
            Type::Basic(_) | Type::Array(_) => 4,
        }
    }

    fn text(&self) -> String {
        match self {
            Type::Basic(b) => (*b as char).to_string(),
            Type::Array(e) => format!("a{}", e.text()),
            Type::Struct(v) => format!("({})", v.iter().map(Type::text).collect::<String>()),
            Type::Entry(k, v) => format!("{{{}{}}}", k.text(), v.text()),
            Type::Variant => "v".into(),
        }
    }
}

/// Parse a whole signature into its complete types.
fn parse_signature(sig: &str) -> Result<Vec<Type>, DbusError> {
    let b = sig.as_bytes();
    if b.len() > 255 {
        return Err(malformed("signature longer than 255"));
    }
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < b.len() {
        out.push(parse_one(b, &mut pos, 0, false)?);
    }
    Ok(out)
}

fn parse_one(b: &[u8], pos: &mut usize, depth: usize, in_array: bool) -> Result<Type, DbusError> {
    if depth > MAX_DEPTH {
        return Err(malformed("signature nested too deeply"));
    }
    let c = *b
        .get(*pos)
        .ok_or_else(|| malformed("signature ends early"))?;
    *pos += 1;
    Ok(match c {
        b'y' | b'b' | b'n' | b'q' | b'i' | b'u' | b'x' | b't' | b'd' | b's' | b'o' | b'g'
        | b'h' => Type::Basic(c),
        b'v' => Type::Variant,
        b'a' => Type::Array(Box::new(parse_one(b, pos, depth + 1, true)?)),
        b'(' => {
            let mut fields = Vec::new();
            while b.get(*pos) != Some(&b')') {
                fields.push(parse_one(b, pos, depth + 1, false)?);
            }
            *pos += 1;
            if fields.is_empty() {
                return Err(malformed("empty struct in signature"));
            }
            Type::Struct(fields)
        }
        b'{' if in_array => {
            let k = parse_one(b, pos, depth + 1, false)?;
            if !matches!(k, Type::Basic(_)) {
                return Err(malformed("dict key is not a basic type"));
            }
            let v = parse_one(b, pos, depth + 1, false)?;
            if b.get(*pos) != Some(&b'}') {
                return Err(malformed("dict entry has more than two types"));
            }
            *pos += 1;
            Type::Entry(Box::new(k), Box::new(v))
        }
        other => {
            return Err(malformed(format!(
                "bad signature character {:?}",
                other as char
            )))
        }
    })
}

/// Reads values from a message buffer; offsets count from the message start (alignment).
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    little: bool,
}

impl<'a> Reader<'a> {
    fn align(&mut self, n: usize) -> Result<(), DbusError> {
        let p = self.pos.div_ceil(n) * n;
        if p > self.buf.len() {
            return Err(malformed("padding runs past the end"));
        }
        if self.buf[self.pos..p].iter().any(|&x| x != 0) {
            return Err(malformed("non-zero padding"));
        }
        self.pos = p;
        Ok(())
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DbusError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| malformed("value runs past the end"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], DbusError> {
        self.align(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        if !self.little {
            a.reverse();
        }
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, DbusError> {
        self.fixed::<4>().map(u32::from_le_bytes)
    }
    fn string(&mut self, len: usize) -> Result<String, DbusError> {
        let bytes = self.take(len)?;
        if self.take(1)? != [0] {
            return Err(malformed("string not NUL-terminated"));
        }
        String::from_utf8(bytes.to_vec()).map_err(|_| malformed("string is not UTF-8"))
    }

    fn value(&mut self, t: &Type, depth: usize) -> Result<Value, DbusError> {
        if depth > MAX_DEPTH {
            return Err(malformed("value nested too deeply"));
        }
        Ok(match t {
            Type::Basic(b'y') => Value::Byte(self.take(1)?[0]),
            Type::Basic(b'b') => match self.u32()? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                v => return Err(malformed(format!("boolean {v}"))),
            },
            Type::Basic(b'n') => Value::I16(i16::from_le_bytes(self.fixed()?)),
            Type::Basic(b'q') => Value::U16(u16::from_le_bytes(self.fixed()?)),
            Type::Basic(b'i') => Value::I32(i32::from_le_bytes(self.fixed()?)),
            Type::Basic(b'u') => Value::U32(u32::from_le_bytes(self.fixed()?)),
            Type::Basic(b'h') => Value::Fd(u32::from_le_bytes(self.fixed()?)),
            Type::Basic(b'x') => Value::I64(i64::from_le_bytes(self.fixed()?)),
            Type::Basic(b't') => Value::U64(u64::from_le_bytes(self.fixed()?)),
            Type::Basic(b'd') => Value::Double(f64::from_le_bytes(self.fixed()?)),
            Type::Basic(c @ (b's' | b'o')) => {
                let len = self.u32()? as usize;
                let s = self.string(len)?;
                if *c == b's' {
                    Value::Str(s)
                } else {
                    Value::Path(s)
                }
            }
            Type::Basic(b'g') => {
                let len = self.take(1)?[0] as usize;
                Value::Signature(self.string(len)?)
            }
            Type::Basic(other) => {
                return Err(malformed(format!("type {:?}", *other as char)));
            }
            Type::Variant => {
                let len = self.take(1)?[0] as usize;
                let sig = self.string(len)?;
                let types = parse_signature(&sig)?;
                let [inner] = types.as_slice() else {
                    return Err(malformed("variant signature is not one type"));
                };
                Value::Variant(Box::new(self.value(inner, depth + 1)?))
            }
            Type::Array(elem) => {
                let len = self.u32()? as usize;
                if len > MAX_MESSAGE {
                    return Err(malformed("array longer than a message"));
                }
                // The padding before the first element is not part of the length.
                self.align(elem.alignment())?;
                let end = self
                    .pos
                    .checked_add(len)
                    .filter(|&e| e <= self.buf.len())
                    .ok_or_else(|| malformed("array runs past the end"))?;
                let mut items = Vec::new();
                while self.pos < end {
                    items.push(self.value(elem, depth + 1)?);
                }
                if self.pos != end {
                    return Err(malformed("array element overruns the array"));
                }
                Value::Array(elem.text(), items)
            }
            Type::Struct(fields) => {
                self.align(8)?;
                let mut v = Vec::with_capacity(fields.len());
                for f in fields {
                    v.push(self.value(f, depth + 1)?);
                }
                Value::Struct(v)
            }
            Type::Entry(k, v) => {
                self.align(8)?;
                let k = self.value(k, depth + 1)?;
                let v = self.value(v, depth + 1)?;
                Value::Entry(Box::new(k), Box::new(v))
            }
        })
    }
}

/// Writes little-endian values; offsets count from the message start.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn align(&mut self, n: usize) {
        while self.buf.len() % n != 0 {
            self.buf.push(0);
        }
    }
    fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn value(&mut self, v: &Value) -> Result<(), DbusError> {
        match v {
            Value::Byte(b) => self.buf.push(*b),
            Value::Bool(b) => self.u32(u32::from(*b)),
            Value::I16(x) => {
                self.align(2);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::U16(x) => {
                self.align(2);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::I32(x) => {
                self.align(4);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::U32(x) | Value::Fd(x) => self.u32(*x),
            Value::I64(x) => {
                self.align(8);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::U64(x) => {
                self.align(8);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::Double(x) => {
                self.align(8);
                self.buf.extend_from_slice(&x.to_le_bytes())
            }
            Value::Str(s) | Value::Path(s) => {
                if s.contains('\0') {
                    return Err(malformed("string with NUL"));
                }
                self.u32(u32::try_from(s.len()).map_err(|_| malformed("string too long"))?);
                self.buf.extend_from_slice(s.as_bytes());
                self.buf.push(0);
            }
            Value::Signature(s) => self.signature(s)?,
            Value::Variant(inner) => {
                self.signature(&inner.signature())?;
                self.value(inner)?;
            }
            Value::Array(elem, items) => {
                let t = parse_signature(&format!("a{elem}"))?;
                let [Type::Array(t)] = t.as_slice() else {
                    return Err(malformed("array element signature is not one type"));
                };
                self.u32(0);
                let len_at = self.buf.len() - 4;
                self.align(t.alignment());
                let start = self.buf.len();
                for i in items {
                    if i.signature() != *elem {
                        return Err(malformed("array element of another type"));
                    }
                    self.value(i)?;
                }
                let len = u32::try_from(self.buf.len() - start)
                    .map_err(|_| malformed("array too long"))?;
                self.buf[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
            }
            Value::Struct(fields) => {
                self.align(8);
                for f in fields {
                    self.value(f)?;
                }
            }
            Value::Entry(k, v) => {
                self.align(8);
                self.value(k)?;
                self.value(v)?;
            }
        }
        Ok(())
    }
    fn signature(&mut self, s: &str) -> Result<(), DbusError> {
        let len = u8::try_from(s.len()).map_err(|_| malformed("signature too long"))?;
        self.buf.push(len);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
        Ok(())
    }
}

/// Message types.
pub const METHOD_CALL: u8 = 1;
pub const METHOD_RETURN: u8 = 2;
pub const ERROR: u8 = 3;
pub const SIGNAL: u8 = 4;

/// A parsed or to-be-sent message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Message {
    pub kind: u8,
    pub flags: u8,
    pub serial: u32,
    pub path: Option<String>,
    pub interface: Option<String>,
    pub member: Option<String>,
    pub error_name: Option<String>,
    pub reply_serial: Option<u32>,
    pub destination: Option<String>,
    pub sender: Option<String>,
    pub body: Vec<Value>,
}

impl Message {
    pub fn method_call(
        destination: Option<&str>,
        path: &str,
        interface: &str,
        member: &str,
        body: Vec<Value>,
    ) -> Message {
        Message {
            kind: METHOD_CALL,
            path: Some(path.into()),
            interface: Some(interface.into()),
            member: Some(member.into()),
            destination: destination.map(str::to_string),
            body,
            ..Message::default()
        }
    }

    /// The wire bytes (little-endian).
    pub fn to_bytes(&self) -> Result<Vec<u8>, DbusError> {
        let mut body = Writer::default();
        for v in &self.body {
            body.value(v)?;
        }
        let sig: String = self.body.iter().map(Value::signature).collect();
        let mut fields = Vec::new();
        let mut field = |code: u8, v: Value| {
            fields.push(Value::Struct(vec![
                Value::Byte(code),
                Value::Variant(Box::new(v)),
            ]))
        };
        if let Some(p) = &self.path {
            field(1, Value::Path(p.clone()));
        }
        if let Some(i) = &self.interface {
            field(2, Value::Str(i.clone()));
        }
        if let Some(m) = &self.member {
            field(3, Value::Str(m.clone()));
        }
        if let Some(e) = &self.error_name {
            field(4, Value::Str(e.clone()));
        }
        if let Some(r) = self.reply_serial {
            field(5, Value::U32(r));
        }
        if let Some(d) = &self.destination {
            field(6, Value::Str(d.clone()));
        }
        if let Some(s) = &self.sender {
            field(7, Value::Str(s.clone()));
        }
        if !sig.is_empty() {
            field(8, Value::Signature(sig));
        }
        let mut w = Writer::default();
        w.buf.extend_from_slice(&[b'l', self.kind, self.flags, 1]);
        w.u32(u32::try_from(body.buf.len()).map_err(|_| malformed("body too long"))?);
        w.u32(self.serial);
        w.value(&Value::Array("(yv)".into(), fields))?;
        w.align(8);
        w.buf.extend_from_slice(&body.buf);
        if w.buf.len() > MAX_MESSAGE {
            return Err(malformed("message too long"));
        }
        Ok(w.buf)
    }

    /// How many bytes the message starting with these 16 bytes takes in all.
    pub fn total_len(fixed: &[u8; 16]) -> Result<usize, DbusError> {
        let little = match fixed[0] {
            b'l' => true,
            b'B' => false,
            o => return Err(malformed(format!("byte order {o:#x}"))),
        };
        let word = |b: [u8; 4]| {
            if little {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            }
        };
        let body = word([fixed[4], fixed[5], fixed[6], fixed[7]]) as usize;
        let fields = word([fixed[12], fixed[13], fixed[14], fixed[15]]) as usize;
        let header = (16usize + fields).div_ceil(8) * 8;
        let total = header
            .checked_add(body)
            .filter(|&t| t <= MAX_MESSAGE && fields <= MAX_MESSAGE)
            .ok_or_else(|| {
                malformed(format!("message of {} bytes", header as u64 + body as u64))
            })?;
        Ok(total)
    }

    /// Parse one whole message.
    pub fn parse(buf: &[u8]) -> Result<Message, DbusError> {
        if buf.len() < 16 {
            return Err(malformed("shorter than a header"));
        }
        let mut fixed = [0u8; 16];
        fixed.copy_from_slice(&buf[..16]);
        if Message::total_len(&fixed)? != buf.len() {
            return Err(malformed("length does not match the header"));
        }
        if buf[3] != 1 {
            return Err(malformed(format!("protocol version {}", buf[3])));
        }
        let mut r = Reader {
            buf,
            pos: 4,
            little: buf[0] == b'l',
        };
        let body_len = r.u32()? as usize;
        let mut m = Message {
            kind: buf[1],
            flags: buf[2],
            serial: r.u32()?,
            ..Message::default()
        };
        let fields = r.value(
            &Type::Array(Box::new(Type::Struct(vec![
                Type::Basic(b'y'),
                Type::Variant,
            ]))),
            0,
        )?;
        let mut signature = String::new();
        if let Value::Array(_, items) = fields {
            for f in items {
                let Value::Struct(mut kv) = f else { continue };
                let (Some(v), Some(Value::Byte(code))) = (kv.pop(), kv.pop()) else {
                    continue;
                };
                let Value::Variant(v) = v else { continue };
                let text = v.as_str().map(str::to_string);
                match code {
                    1 => m.path = text,
                    2 => m.interface = text,
                    3 => m.member = text,
                    4 => m.error_name = text,
                    5 => m.reply_serial = v.as_i64().and_then(|x| u32::try_from(x).ok()),
                    6 => m.destination = text,
                    7 => m.sender = text,
                    8 => signature = text.unwrap_or_default(),
                    _ => {}
                }
            }
        }
        r.align(8)?;
        if r.buf.len() - r.pos != body_len {
            return Err(malformed("body length does not match"));
        }
        for t in parse_signature(&signature)? {
            m.body.push(r.value(&t, 0)?);
        }
        if r.pos != buf.len() {
            return Err(malformed("bytes left after the body"));
        }
        Ok(m)
    }
}

/// A connection to a bus or to a peer (systemd's private socket).
pub struct Connection {
    stream: UnixStream,
    serial: u32,
    timeout: Duration,
    /// Why the stream can no longer be trusted, once an exchange failed part-way.
    broken: Option<String>,
}

/// Where the system bus listens, per `DBUS_SYSTEM_BUS_ADDRESS` or the standard path.
pub fn system_bus_path() -> String {
    std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
        .ok()
        .and_then(|a| {
            a.split(';').find_map(|x| {
                x.strip_prefix("unix:path=")
                    .map(|p| p.split(',').next().unwrap_or(p).to_string())
            })
        })
        .unwrap_or_else(|| "/run/dbus/system_bus_socket".to_string())
}

impl Connection {
    /// Connect to the socket at `path` and authenticate. `bus`: a message bus (send Hello),
    /// or a peer-to-peer socket such as systemd's `/run/systemd/private`.
    pub fn open(path: &Path, bus: bool, timeout: Duration) -> Result<Connection, DbusError> {
        let stream = UnixStream::connect(path).map_err(|source| DbusError::Connect {
            path: path.display().to_string(),
            source,
        })?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        let mut c = Connection {
            stream,
            serial: 0,
            timeout,
            broken: None,
        };
        c.authenticate().map_err(|e| c.timed_out(e))?;
        if bus {
            c.call(Message::method_call(
                Some("org.freedesktop.DBus"),
                "/org/freedesktop/DBus",
                "org.freedesktop.DBus",
                "Hello",
                Vec::new(),
            ))?;
        }
        Ok(c)
    }

    fn authenticate(&mut self) -> Result<(), DbusError> {
        let uid = crate::sys::euid();
        let hex: String = uid
            .to_string()
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect();
        // BEGIN goes in the same write as AUTH, as sd-bus's own client sends it, never just
        // before the first message: systemd's sd-bus server, when BEGIN and the first method
        // call reach it in one read, leaves the call in its buffer unanswered until other
        // traffic wakes the connection (seen in the lifecycle VM under load: GetUnit waited
        // past any timeout while `systemctl` answered at once). A server that refuses the AUTH
        // ignores the BEGIN with it.
        self.stream
            .write_all(format!("\0AUTH EXTERNAL {hex}\r\nBEGIN\r\n").as_bytes())?;
        let line = self.read_line()?;
        if !line.starts_with("OK ") {
            return Err(DbusError::Auth(line));
        }
        Ok(())
    }

    fn read_line(&mut self) -> Result<String, DbusError> {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            if line.len() > 512 {
                return Err(DbusError::Auth("over-long line".into()));
            }
            self.stream.read_exact(&mut b)?;
            line.push(b[0]);
        }
        Ok(String::from_utf8_lossy(&line).trim_end().to_string())
    }

    fn read_message(&mut self) -> Result<Message, DbusError> {
        let mut fixed = [0u8; 16];
        self.stream.read_exact(&mut fixed)?;
        let total = Message::total_len(&fixed)?;
        let mut buf = vec![0u8; total];
        buf[..16].copy_from_slice(&fixed);
        self.stream.read_exact(&mut buf[16..])?;
        Message::parse(&buf)
    }

    /// A read or write that hit the socket timeout says so (the OS reports it as EAGAIN).
    fn timed_out(&self, e: DbusError) -> DbusError {
        match e {
            DbusError::Io(io)
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                DbusError::Timeout(self.timeout)
            }
            e => e,
        }
    }

    /// Send a method call and wait for its reply (signals and other traffic are skipped).
    /// A call that fails part-way (timeout, I/O, a malformed message) leaves the stream at an
    /// unknown point, so the connection refuses further calls at once: a hung peer costs one
    /// timeout per connection, not one per question.
    pub fn call(&mut self, m: Message) -> Result<Message, DbusError> {
        if let Some(why) = &self.broken {
            return Err(DbusError::Unusable(why.clone()));
        }
        let r = self.exchange(m).map_err(|e| self.timed_out(e));
        if let Err(e) = &r {
            if !matches!(e, DbusError::Remote { .. }) {
                self.broken = Some(e.to_string());
            }
        }
        r
    }

    fn exchange(&mut self, mut m: Message) -> Result<Message, DbusError> {
        self.serial = self.serial.wrapping_add(1).max(1);
        m.serial = self.serial;
        self.stream.write_all(&m.to_bytes()?)?;
        loop {
            let r = self.read_message()?;
            if r.reply_serial != Some(m.serial) {
                continue;
            }
            if r.kind == ERROR {
                return Err(DbusError::Remote {
                    name: r.error_name.unwrap_or_else(|| "error".into()),
                    message: r
                        .body
                        .first()
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                });
            }
            return Ok(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }
    fn var(v: Value) -> Value {
        Value::Variant(Box::new(v))
    }

    /// A `GetAll` reply as systemd sends one: a{sv} with strings, numbers, booleans, arrays
    /// and the exec-command structs daqtune does not read but must skip correctly.
    fn props_reply() -> Message {
        let exec = Value::Array(
            "(sasbttttuii)".into(),
            vec![Value::Struct(vec![
                s("/usr/bin/daqtune"),
                Value::Array("s".into(), vec![s("daqtune"), s("apply")]),
                Value::Bool(false),
                Value::U64(1),
                Value::U64(2),
                Value::U64(3),
                Value::U64(4),
                Value::U32(321),
                Value::I32(1),
                Value::I32(0),
            ])],
        );
        let dict = Value::Array(
            "{sv}".into(),
            vec![
                Value::Entry(Box::new(s("Result")), Box::new(var(s("exit-code")))),
                Value::Entry(Box::new(s("ExecStart")), Box::new(var(exec))),
                Value::Entry(Box::new(s("ExecMainStatus")), Box::new(var(Value::I32(3)))),
                Value::Entry(Box::new(s("Restart")), Box::new(var(Value::Bool(true)))),
                Value::Entry(Box::new(s("Nice")), Box::new(var(Value::I16(-5)))),
                Value::Entry(
                    Box::new(s("TimeoutUSec")),
                    Box::new(var(Value::U64(90_000_000))),
                ),
                Value::Entry(Box::new(s("Weight")), Box::new(var(Value::Double(0.5)))),
            ],
        );
        Message {
            kind: METHOD_RETURN,
            serial: 9,
            reply_serial: Some(4),
            destination: Some(":1.7".into()),
            body: vec![dict],
            ..Message::default()
        }
    }

    #[test]
    fn round_trips_a_properties_reply() {
        let m = props_reply();
        let bytes = m.to_bytes().expect("marshal");
        let back = Message::parse(&bytes).expect("parse");
        assert_eq!(back, m);
    }

    #[test]
    fn method_call_header_is_what_dbus_expects() {
        let m = Message {
            serial: 1,
            ..Message::method_call(
                Some("org.freedesktop.systemd1"),
                "/org/freedesktop/systemd1",
                "org.freedesktop.systemd1.Manager",
                "GetUnit",
                vec![s("daqtune-governor.service")],
            )
        };
        let b = m.to_bytes().expect("marshal");
        assert_eq!(&b[..4], b"l\x01\x00\x01");
        // Body: u32 length + 24 bytes + NUL.
        assert_eq!(u32::from_le_bytes([b[4], b[5], b[6], b[7]]), 4 + 24 + 1);
        assert_eq!(u32::from_le_bytes([b[8], b[9], b[10], b[11]]), 1);
        let header_end = b.len() - 29;
        assert_eq!(header_end % 8, 0, "body starts on an 8-byte boundary");
        let back = Message::parse(&b).expect("parse");
        assert_eq!(back.member.as_deref(), Some("GetUnit"));
        assert_eq!(back.body, vec![s("daqtune-governor.service")]);
    }

    #[test]
    fn big_endian_messages_are_read() {
        // A big-endian METHOD_RETURN with reply serial 2 and body "s" = "ok", built by hand.
        let mut b = vec![b'B', METHOD_RETURN, 0, 1];
        b.extend_from_slice(&7u32.to_be_bytes()); // body length
        b.extend_from_slice(&5u32.to_be_bytes()); // serial
        let mut fields = Vec::new();
        // (5, v u 2)
        fields.extend_from_slice(&[5, 1, b'u', 0]);
        fields.extend_from_slice(&2u32.to_be_bytes());
        // pad to 8 for the next struct (offset 16 + 8 = 24: already aligned)
        fields.extend_from_slice(&[8, 1, b'g', 0, 1, b's', 0]);
        b.extend_from_slice(&(fields.len() as u32).to_be_bytes());
        b.extend_from_slice(&fields);
        while b.len() % 8 != 0 {
            b.push(0);
        }
        b.extend_from_slice(&2u32.to_be_bytes());
        b.extend_from_slice(b"ok\0");
        let m = Message::parse(&b).expect("parse");
        assert_eq!(m.reply_serial, Some(2));
        assert_eq!(m.body, vec![s("ok")]);
    }

    #[test]
    fn hostile_messages_are_errors_not_panics() {
        let good = props_reply().to_bytes().expect("marshal");
        // Every truncation and every single-byte corruption must parse or fail, never panic.
        for n in 0..good.len() {
            let _ = Message::parse(&good[..n]);
        }
        for i in 0..good.len() {
            for x in [0u8, 0xff, 0x7f, b'a', b'('] {
                let mut b = good.clone();
                b[i] = x;
                let _ = Message::parse(&b);
            }
        }
        // A header claiming a huge body is refused before anything is allocated.
        let mut fixed = [0u8; 16];
        fixed[..4].copy_from_slice(b"l\x02\x00\x01");
        fixed[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Message::total_len(&fixed).is_err());
        // Signatures nested past the limit.
        assert!(parse_signature(
            &"a".repeat(100)
                .chars()
                .chain("y".chars())
                .collect::<String>()
        )
        .is_err());
        assert!(parse_signature("(").is_err());
        assert!(
            parse_signature("{sv}").is_err(),
            "dict entry outside an array"
        );
        assert!(parse_signature("a{vs}").is_err(), "dict key must be basic");
        assert_eq!(parse_signature("a{sv}as(ii)").expect("ok").len(), 3);
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let _ = Message::parse(&bytes);
            if bytes.len() >= 16 {
                let mut f = [0u8; 16];
                f.copy_from_slice(&bytes[..16]);
                let _ = Message::total_len(&f);
            }
        }
        #[test]
        fn strings_round_trip(a in "[^\u{0}]{0,40}", b in "[^\u{0}]{0,40}", n in proptest::prelude::any::<u64>()) {
            let m = Message {
                kind: METHOD_RETURN,
                reply_serial: Some(1),
                body: vec![Value::Str(a), Value::U64(n), Value::Array("s".into(), vec![Value::Str(b)])],
                ..Message::default()
            };
            let bytes = m.to_bytes().expect("marshal");
            proptest::prop_assert_eq!(Message::parse(&bytes).expect("parse"), m);
        }
    }
}
