//! `salt.payload`: the msgpack dialect Salt speaks on the wire.
//!
//! On the network Salt packs with the *old* msgpack spec (`use_bin_type=False`):
//! text and byte strings both use the str/raw family and `str8` (`d9`) is never
//! written. The reader accepts every family and turns each raw that is valid
//! UTF-8 into [`Value::String`], anything else into [`Value::Binary`], exactly
//! like `salt.payload.loads`.
//!
//! The decoder is written for hostile input: it never reserves more memory than
//! the remaining bytes can justify, limits nesting, and rejects trailing bytes.

pub use rmpv::Value;

/// Maximum nesting of arrays/maps accepted by [`loads`].
pub const MAX_DEPTH: usize = 256;

/// msgpack ext type Salt uses for `datetime` (ASCII `%Y%m%dT%H:%M:%S.%f`).
pub const EXT_DATETIME: i8 = 78;

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// The input ended inside an object; more bytes may complete it (streams only).
    #[error("incomplete msgpack object")]
    Incomplete,
    /// The input ended inside an object and no more data will come.
    #[error("truncated msgpack object")]
    Truncated,
    /// A complete object was followed by extra bytes.
    #[error("{0} trailing bytes after msgpack object")]
    TrailingBytes(usize),
    /// Arrays/maps nested deeper than [`MAX_DEPTH`].
    #[error("msgpack nesting deeper than {MAX_DEPTH}")]
    TooDeep,
    /// A marker byte that msgpack never uses (`0xc1`).
    #[error("invalid msgpack marker 0x{0:02x}")]
    BadMarker(u8),
    /// A declared length that cannot be represented on this platform.
    #[error("declared msgpack length too large")]
    TooLarge,
    /// Empty input.
    #[error("empty payload")]
    Empty,
    /// More array/map slots than the payload's size allows ([`loads_bounded`]).
    #[error("msgpack object holds more elements than its size allows")]
    TooManyElements,
}

// ---------------------------------------------------------------------------
// Encoding

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// `use_bin_type=False`: str family for everything, no `d9`.
    Wire,
    /// `use_bin_type=True`: `d9` allowed for str, bin family for bytes.
    BinType,
}

/// `salt.payload.dumps` as used on the network (`use_bin_type=False`).
///
/// Strings and binaries are both written with the str/raw family (`a0`-`bf`,
/// `da`, `db`; never `d9`, never `c4`-`c6`), integers minimally, floats as f64,
/// maps in their stored order, ext values as msgpack-python writes them.
pub fn dumps(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out, v, Flavor::Wire);
    out
}

/// The `use_bin_type=True` variant (files, IPC, `minion_sign_messages` input):
/// str family including `d9` for strings, bin family for binaries.
pub fn dumps_bin(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out, v, Flavor::BinType);
    out
}

fn encode(out: &mut Vec<u8>, v: &Value, flavor: Flavor) {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(false) => out.push(0xc2),
        Value::Boolean(true) => out.push(0xc3),
        Value::Integer(i) => {
            if let Some(u) = i.as_u64() {
                encode_uint(out, u);
            } else if let Some(n) = i.as_i64() {
                encode_int(out, n);
            } else {
                // rmpv integers are always u64 or i64; keep total anyway.
                out.push(0xc0);
            }
        }
        Value::F32(f) => encode_f64(out, f64::from(*f)),
        Value::F64(f) => encode_f64(out, *f),
        Value::String(s) => encode_str(out, s.as_bytes(), flavor),
        Value::Binary(b) => match flavor {
            Flavor::Wire => encode_str(out, b, flavor),
            Flavor::BinType => encode_bin(out, b),
        },
        Value::Array(items) => {
            encode_len(out, items.len(), 0x90, 15, 0xdc, 0xdd);
            for item in items {
                encode(out, item, flavor);
            }
        }
        Value::Map(pairs) => {
            encode_len(out, pairs.len(), 0x80, 15, 0xde, 0xdf);
            for (k, val) in pairs {
                encode(out, k, flavor);
                encode(out, val, flavor);
            }
        }
        Value::Ext(ty, data) => encode_ext(out, *ty, data),
    }
}

fn encode_uint(out: &mut Vec<u8>, u: u64) {
    if u < 0x80 {
        out.push(u as u8);
    } else if u <= u64::from(u8::MAX) {
        out.extend_from_slice(&[0xcc, u as u8]);
    } else if u <= u64::from(u16::MAX) {
        out.push(0xcd);
        out.extend_from_slice(&(u as u16).to_be_bytes());
    } else if u <= u64::from(u32::MAX) {
        out.push(0xce);
        out.extend_from_slice(&(u as u32).to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend_from_slice(&u.to_be_bytes());
    }
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        encode_uint(out, n as u64);
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= i64::from(i8::MIN) {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= i64::from(i16::MIN) {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= i64::from(i32::MIN) {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_f64(out: &mut Vec<u8>, f: f64) {
    out.push(0xcb);
    out.extend_from_slice(&f.to_bits().to_be_bytes());
}

/// Writes a length header: fix form (`fix_base | len` up to `fix_max`), then 16- and 32-bit forms.
/// Lengths above `u32::MAX` cannot be represented in msgpack; they are clamped (never reached in
/// practice: such an object would not fit a ZeroMQ frame either).
fn encode_len(out: &mut Vec<u8>, len: usize, fix_base: u8, fix_max: usize, m16: u8, m32: u8) {
    if len <= fix_max {
        out.push(fix_base | len as u8);
    } else if len <= usize::from(u16::MAX) {
        out.push(m16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(m32);
        out.extend_from_slice(&(u32::try_from(len).unwrap_or(u32::MAX)).to_be_bytes());
    }
}

fn encode_str(out: &mut Vec<u8>, b: &[u8], flavor: Flavor) {
    let len = b.len();
    if len <= 31 {
        out.push(0xa0 | len as u8);
    } else if flavor == Flavor::BinType && len <= usize::from(u8::MAX) {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else {
        encode_len(out, len, 0xa0, 31, 0xda, 0xdb);
    }
    out.extend_from_slice(b);
}

fn encode_bin(out: &mut Vec<u8>, b: &[u8]) {
    let len = b.len();
    if len <= usize::from(u8::MAX) {
        out.extend_from_slice(&[0xc4, len as u8]);
    } else if len <= usize::from(u16::MAX) {
        out.push(0xc5);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xc6);
        out.extend_from_slice(&(u32::try_from(len).unwrap_or(u32::MAX)).to_be_bytes());
    }
    out.extend_from_slice(b);
}

fn encode_ext(out: &mut Vec<u8>, ty: i8, data: &[u8]) {
    let len = data.len();
    match len {
        1 => out.push(0xd4),
        2 => out.push(0xd5),
        4 => out.push(0xd6),
        8 => out.push(0xd7),
        16 => out.push(0xd8),
        _ if len <= usize::from(u8::MAX) => out.extend_from_slice(&[0xc7, len as u8]),
        _ if len <= usize::from(u16::MAX) => {
            out.push(0xc8);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(0xc9);
            out.extend_from_slice(&(u32::try_from(len).unwrap_or(u32::MAX)).to_be_bytes());
        }
    }
    out.push(ty as u8);
    out.extend_from_slice(data);
}

// ---------------------------------------------------------------------------
// Decoding

/// `salt.payload.loads`: decode exactly one object that fills `data`.
///
/// Accepts every msgpack family (including `d9` and bin `c4`-`c6`); raws that
/// are valid UTF-8 become [`Value::String`], others [`Value::Binary`]; f32 is
/// widened to f64 (Python has one float type); ext values are kept as
/// [`Value::Ext`] (ext 78 is Salt's datetime).
pub fn loads(data: &[u8]) -> Result<Value, PayloadError> {
    match loads_prefix(data) {
        Ok((v, used)) if used == data.len() => Ok(v),
        Ok((_, used)) => Err(PayloadError::TrailingBytes(data.len() - used)),
        Err(PayloadError::Incomplete) if data.is_empty() => Err(PayloadError::Empty),
        Err(PayloadError::Incomplete) => Err(PayloadError::Truncated),
        Err(e) => Err(e),
    }
}

/// Decode one object from the front of `data`; returns it and the number of
/// bytes it used. [`PayloadError::Incomplete`] means "valid so far, need more".
pub fn loads_prefix(data: &[u8]) -> Result<(Value, usize), PayloadError> {
    let mut r = Reader {
        data,
        pos: 0,
        slots_left: usize::MAX,
    };
    let v = r.value(0)?;
    Ok((v, r.pos))
}

/// Slots any payload may use whatever its size (a few thousand elements).
const SLOT_SLACK_BYTES: usize = 256 * 1024;

/// [`loads`] for bytes from an unauthenticated peer: the array and map slots it builds may take
/// no more memory than the payload itself (plus a small allowance for short payloads), checked
/// before each collection is allocated. A payload of many one-byte elements (16 MiB of `nil`
/// would become half a GiB of values) is refused with [`PayloadError::TooManyElements`]
/// without allocating.
pub fn loads_bounded(data: &[u8]) -> Result<Value, PayloadError> {
    let budget = data.len().max(SLOT_SLACK_BYTES) / std::mem::size_of::<Value>();
    whole(data, budget)
}

/// [`loads`] straight into JSON: equal to `to_json(&loads(data)?)`, without the values in
/// between (for readers that only pass the data on as JSON).
pub fn loads_json(data: &[u8]) -> Result<serde_json::Value, PayloadError> {
    whole(data, usize::MAX)
}

/// Exactly one object filling `data`, built with at most `slots` array and map slots.
fn whole<B: Build>(data: &[u8], slots: usize) -> Result<B, PayloadError> {
    let mut r = Reader {
        data,
        pos: 0,
        slots_left: slots,
    };
    match r.value(0) {
        Ok(v) if r.pos == data.len() => Ok(v),
        Ok(_) => Err(PayloadError::TrailingBytes(data.len() - r.pos)),
        Err(PayloadError::Incomplete) if data.is_empty() => Err(PayloadError::Empty),
        Err(PayloadError::Incomplete) => Err(PayloadError::Truncated),
        Err(e) => Err(e),
    }
}

/// What a decode builds from msgpack items: Salt's values ([`Value`]), or JSON as [`to_json`]
/// converts them ([`loads_json`]), in one pass.
trait Build: Sized {
    type Pairs;
    fn nil() -> Self;
    fn boolean(b: bool) -> Self;
    fn uint(u: u64) -> Self;
    fn int(i: i64) -> Self;
    fn float(f: f64) -> Self;
    /// A str or bin raw.
    fn raw(bytes: &[u8]) -> Self;
    fn ext(ty: i8, data: &[u8]) -> Self;
    fn array(items: Vec<Self>) -> Self;
    fn map_with_capacity(n: usize) -> Self::Pairs;
    fn map_insert(m: &mut Self::Pairs, k: Self, v: Self);
    fn map(m: Self::Pairs) -> Self;
}

impl Build for Value {
    type Pairs = Vec<(Value, Value)>;
    fn nil() -> Self {
        Value::Nil
    }
    fn boolean(b: bool) -> Self {
        Value::Boolean(b)
    }
    fn uint(u: u64) -> Self {
        Value::from(u)
    }
    fn int(i: i64) -> Self {
        Value::from(i)
    }
    fn float(f: f64) -> Self {
        Value::F64(f)
    }
    fn raw(bytes: &[u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(s) => Value::String(s.into()),
            Err(_) => Value::Binary(bytes.to_vec()),
        }
    }
    fn ext(ty: i8, data: &[u8]) -> Self {
        Value::Ext(ty, data.to_vec())
    }
    fn array(items: Vec<Self>) -> Self {
        Value::Array(items)
    }
    fn map_with_capacity(n: usize) -> Self::Pairs {
        Vec::with_capacity(n)
    }
    fn map_insert(m: &mut Self::Pairs, k: Self, v: Self) {
        m.push((k, v));
    }
    fn map(m: Self::Pairs) -> Self {
        Value::Map(m)
    }
}

impl Build for serde_json::Value {
    type Pairs = serde_json::Map<String, serde_json::Value>;
    fn nil() -> Self {
        serde_json::Value::Null
    }
    fn boolean(b: bool) -> Self {
        serde_json::Value::Bool(b)
    }
    fn uint(u: u64) -> Self {
        serde_json::Value::from(u)
    }
    fn int(i: i64) -> Self {
        serde_json::Value::from(i)
    }
    fn float(f: f64) -> Self {
        serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
    fn raw(bytes: &[u8]) -> Self {
        serde_json::Value::String(String::from_utf8_lossy(bytes).into_owned())
    }
    fn ext(_: i8, data: &[u8]) -> Self {
        Self::raw(data)
    }
    fn array(items: Vec<Self>) -> Self {
        serde_json::Value::Array(items)
    }
    fn map_with_capacity(n: usize) -> Self::Pairs {
        serde_json::Map::with_capacity(n)
    }
    fn map_insert(m: &mut Self::Pairs, k: Self, v: Self) {
        let key = match k {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        };
        m.insert(key, v);
    }
    fn map(m: Self::Pairs) -> Self {
        serde_json::Value::Object(m)
    }
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    /// Array/map slots (values) this decode may still allocate.
    slots_left: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PayloadError> {
        if n > self.remaining() {
            return Err(PayloadError::Incomplete);
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PayloadError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, PayloadError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, PayloadError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, PayloadError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, PayloadError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn len32(&mut self) -> Result<usize, PayloadError> {
        usize::try_from(self.u32()?).map_err(|_| PayloadError::TooLarge)
    }

    /// `len` bytes of an ext at the cursor (after its length), its type byte first.
    fn ext_parts(&mut self, len: usize) -> Result<Token<'a>, PayloadError> {
        // Check the whole extent first so a huge declared length fails before reading the type.
        if len >= self.remaining() {
            return Err(PayloadError::Incomplete);
        }
        let ty = self.u8()? as i8;
        Ok(Token::Ext(ty, self.take(len)?))
    }

    /// An array header of `len` items: every item takes at least one byte.
    fn array_of(&self, len: usize) -> Result<Token<'a>, PayloadError> {
        if len > self.remaining() {
            return Err(PayloadError::Incomplete);
        }
        Ok(Token::Array(len))
    }

    /// A map header of `len` entries: every entry takes at least two bytes.
    fn map_of(&self, len: usize) -> Result<Token<'a>, PayloadError> {
        if len > self.remaining() / 2 {
            return Err(PayloadError::Incomplete);
        }
        Ok(Token::Map(len))
    }

    /// The next item at the cursor: a scalar whole, or the header of an array or a map whose
    /// items follow (their count checked against the bytes left).
    pub(crate) fn token(&mut self) -> Result<Token<'a>, PayloadError> {
        let marker = self.u8()?;
        Ok(match marker {
            0x00..=0x7f => Token::UInt(u64::from(marker)),
            0x80..=0x8f => self.map_of(usize::from(marker & 0x0f))?,
            0x90..=0x9f => self.array_of(usize::from(marker & 0x0f))?,
            0xa0..=0xbf => Token::Raw(self.take(usize::from(marker & 0x1f))?),
            0xc0 => Token::Nil,
            0xc1 => return Err(PayloadError::BadMarker(marker)),
            0xc2 => Token::Bool(false),
            0xc3 => Token::Bool(true),
            0xc4 | 0xd9 => {
                let n = self.u8()?;
                Token::Raw(self.take(usize::from(n))?)
            }
            0xc5 | 0xda => {
                let n = self.u16()?;
                Token::Raw(self.take(usize::from(n))?)
            }
            0xc6 | 0xdb => {
                let n = self.len32()?;
                Token::Raw(self.take(n)?)
            }
            0xc7 => {
                let n = self.u8()?;
                self.ext_parts(usize::from(n))?
            }
            0xc8 => {
                let n = self.u16()?;
                self.ext_parts(usize::from(n))?
            }
            0xc9 => {
                let n = self.len32()?;
                self.ext_parts(n)?
            }
            0xca => Token::Float(f64::from(f32::from_bits(self.u32()?))),
            0xcb => Token::Float(f64::from_bits(self.u64()?)),
            0xcc => Token::UInt(u64::from(self.u8()?)),
            0xcd => Token::UInt(u64::from(self.u16()?)),
            0xce => Token::UInt(u64::from(self.u32()?)),
            0xcf => Token::UInt(self.u64()?),
            0xd0 => Token::Int(i64::from(self.u8()? as i8)),
            0xd1 => Token::Int(i64::from(self.u16()? as i16)),
            0xd2 => Token::Int(i64::from(self.u32()? as i32)),
            0xd3 => Token::Int(self.u64()? as i64),
            0xd4 => self.ext_parts(1)?,
            0xd5 => self.ext_parts(2)?,
            0xd6 => self.ext_parts(4)?,
            0xd7 => self.ext_parts(8)?,
            0xd8 => self.ext_parts(16)?,
            0xdc => {
                let n = self.u16()?;
                self.array_of(usize::from(n))?
            }
            0xdd => {
                let n = self.len32()?;
                self.array_of(n)?
            }
            0xde => {
                let n = self.u16()?;
                self.map_of(usize::from(n))?
            }
            0xdf => {
                let n = self.len32()?;
                self.map_of(n)?
            }
            0xe0..=0xff => Token::Int(i64::from(marker as i8)),
        })
    }

    fn value<B: Build>(&mut self, depth: usize) -> Result<B, PayloadError> {
        Ok(match self.token()? {
            Token::Nil => B::nil(),
            Token::Bool(b) => B::boolean(b),
            Token::UInt(u) => B::uint(u),
            Token::Int(i) => B::int(i),
            Token::Float(f) => B::float(f),
            Token::Raw(bytes) => B::raw(bytes),
            Token::Ext(ty, data) => B::ext(ty, data),
            Token::Array(len) => {
                if depth >= MAX_DEPTH {
                    return Err(PayloadError::TooDeep);
                }
                self.spend(len)?;
                let mut items = Vec::with_capacity(len);
                for _ in 0..len {
                    items.push(self.value(depth + 1)?);
                }
                B::array(items)
            }
            Token::Map(len) => {
                if depth >= MAX_DEPTH {
                    return Err(PayloadError::TooDeep);
                }
                self.spend(2 * len)?;
                let mut m = B::map_with_capacity(len);
                for _ in 0..len {
                    let k = self.value(depth + 1)?;
                    let v = self.value(depth + 1)?;
                    B::map_insert(&mut m, k, v);
                }
                B::map(m)
            }
        })
    }

    fn spend(&mut self, slots: usize) -> Result<(), PayloadError> {
        self.slots_left = self
            .slots_left
            .checked_sub(slots)
            .ok_or(PayloadError::TooManyElements)?;
        Ok(())
    }
}

/// One msgpack item as [`Reader::token`] reads it: scalars whole, containers by their
/// header (their items are the tokens that follow).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Token<'a> {
    Nil,
    Bool(bool),
    UInt(u64),
    Int(i64),
    Float(f64),
    /// A str or bin.
    Raw(&'a [u8]),
    Ext(i8, &'a [u8]),
    Array(usize),
    Map(usize),
}

/// A reader of the msgpack items of `data`, one [`Token`] at a time (for walkers that write
/// another format as they read, with no tree in between).
pub(crate) struct Tokens<'a>(Reader<'a>);

impl<'a> Tokens<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Tokens<'a> {
        Tokens(Reader {
            data,
            pos: 0,
            slots_left: 0,
        })
    }

    pub(crate) fn next(&mut self) -> Result<Token<'a>, PayloadError> {
        self.0.token()
    }

    /// Whether every byte was read.
    pub(crate) fn at_end(&self) -> bool {
        self.0.remaining() == 0
    }
}

/// The `cmd` of a clear request (`{"enc": "clear", "load": {"cmd": ...}}`), read from its bytes
/// without decoding anything else: the request server sorts sign-ins from other requests with
/// it before a worker decodes them. `None` for an AES request, a load without a string `cmd`, or
/// bytes that are not one msgpack map. No allocation; every other value is skipped in time
/// bounded by the input's length (no recursion).
pub fn clear_cmd(data: &[u8]) -> Option<&[u8]> {
    let mut r = Reader {
        data,
        pos: 0,
        slots_left: 0,
    };
    let entries = r.map_len()?;
    let (mut clear, mut cmd) = (false, None);
    for _ in 0..entries {
        match r.str_or_skip().ok()? {
            Some(b"enc") => clear = r.str_or_skip().ok()? == Some(b"clear"),
            Some(b"load") => {
                let Some(n) = r.map_len() else {
                    r.skip().ok()?;
                    continue;
                };
                cmd = None;
                for _ in 0..n {
                    match r.str_or_skip().ok()? {
                        Some(b"cmd") => cmd = r.str_or_skip().ok()?,
                        _ => r.skip().ok()?,
                    }
                }
            }
            _ => r.skip().ok()?,
        }
    }
    (r.remaining() == 0 && clear).then_some(cmd).flatten()
}

/// The string under `key` in the msgpack map `data`, read without decoding anything else;
/// `None` when `data` is not a map, or `key` is absent or not a string.
pub fn map_str<'a>(data: &'a [u8], key: &str) -> Option<&'a str> {
    let mut r = Reader {
        data,
        pos: 0,
        slots_left: 0,
    };
    for _ in 0..r.map_len()? {
        match r.str_or_skip().ok()? {
            Some(k) if k == key.as_bytes() => {
                return std::str::from_utf8(r.str_or_skip().ok()??).ok();
            }
            _ => r.skip().ok()?,
        }
    }
    None
}

/// The msgpack bytes of the value under `key` in the map `data`, unparsed; `None` when `data`
/// is not a map, or has no entry or several entries under `key` (a decoded map keeps one of
/// them: which one depends on the decoder).
pub fn map_field<'a>(data: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let [field] = map_fields(data, [key]);
    field
}

/// [`map_field`] of several keys, in one walk of `data`.
pub fn map_fields<'a, const N: usize>(data: &'a [u8], keys: [&str; N]) -> [Option<&'a [u8]>; N] {
    let mut found = [None; N];
    let mut twice = [false; N];
    let mut r = Reader {
        data,
        pos: 0,
        slots_left: 0,
    };
    let Some(entries) = r.map_len() else {
        return [None; N];
    };
    for _ in 0..entries {
        let Ok(key) = r.str_or_skip() else {
            return [None; N];
        };
        let start = r.pos;
        if r.skip().is_err() {
            return [None; N];
        }
        let Some(key) = key else { continue };
        if let Some(i) = keys.iter().position(|k| k.as_bytes() == key) {
            twice[i] |= found[i].is_some();
            found[i] = Some(&data[start..r.pos]);
        }
    }
    for (f, t) in found.iter_mut().zip(twice) {
        if t {
            *f = None;
        }
    }
    found
}

/// Whether `data` is exactly one well-formed msgpack object, walked without decoding it.
pub fn check(data: &[u8]) -> Result<(), PayloadError> {
    let mut r = Reader {
        data,
        pos: 0,
        slots_left: 0,
    };
    match r.skip() {
        Ok(()) if r.pos == data.len() => Ok(()),
        Ok(()) => Err(PayloadError::TrailingBytes(data.len() - r.pos)),
        Err(PayloadError::Incomplete) if data.is_empty() => Err(PayloadError::Empty),
        Err(PayloadError::Incomplete) => Err(PayloadError::Truncated),
        Err(e) => Err(e),
    }
}

impl<'a> Reader<'a> {
    /// The entry count of a map at the cursor, consuming its header; `None` (cursor unmoved)
    /// for anything else.
    fn map_len(&mut self) -> Option<usize> {
        let start = self.pos;
        let n = match self.u8().ok()? {
            m @ 0x80..=0x8f => usize::from(m & 0x0f),
            0xde => usize::from(self.u16().ok()?),
            0xdf => self.len32().ok()?,
            _ => return None,
        };
        if n > self.remaining() / 2 {
            self.pos = start;
            return None;
        }
        Some(n)
    }

    /// The bytes of a str at the cursor, or `None` after skipping a value of any other type.
    fn str_or_skip(&mut self) -> Result<Option<&'a [u8]>, PayloadError> {
        let n = match self.data.get(self.pos) {
            Some(m @ 0xa0..=0xbf) => {
                self.pos += 1;
                usize::from(m & 0x1f)
            }
            Some(0xd9) => {
                self.pos += 1;
                usize::from(self.u8()?)
            }
            Some(0xda) => {
                self.pos += 1;
                usize::from(self.u16()?)
            }
            Some(0xdb) => {
                self.pos += 1;
                self.len32()?
            }
            _ => return self.skip().map(|()| None),
        };
        self.take(n).map(Some)
    }

    /// Past one value of any type: containers add their items to a count of values still to
    /// pass, so nesting costs no stack.
    fn skip(&mut self) -> Result<(), PayloadError> {
        let mut pending: usize = 1;
        while pending > 0 {
            pending -= 1;
            let marker = self.u8()?;
            let (items, bytes) = match marker {
                0x00..=0x7f | 0xc0 | 0xc2 | 0xc3 | 0xe0..=0xff => (0, 0),
                0x80..=0x8f => (2 * usize::from(marker & 0x0f), 0),
                0x90..=0x9f => (usize::from(marker & 0x0f), 0),
                0xa0..=0xbf => (0, usize::from(marker & 0x1f)),
                0xc1 => return Err(PayloadError::BadMarker(marker)),
                0xc4 | 0xd9 => (0, usize::from(self.u8()?)),
                0xc5 | 0xda => (0, usize::from(self.u16()?)),
                0xc6 | 0xdb => (0, self.len32()?),
                0xc7 => (0, usize::from(self.u8()?) + 1),
                0xc8 => (0, usize::from(self.u16()?) + 1),
                0xc9 => (0, self.len32()?.saturating_add(1)),
                0xcc | 0xd0 => (0, 1),
                0xcd | 0xd1 | 0xd4 => (0, 2),
                0xd5 => (0, 3),
                0xca | 0xce | 0xd2 => (0, 4),
                0xd6 => (0, 5),
                0xcb | 0xcf | 0xd3 => (0, 8),
                0xd7 => (0, 9),
                0xd8 => (0, 17),
                0xdc => (usize::from(self.u16()?), 0),
                0xdd => (self.len32()?, 0),
                0xde => (2 * usize::from(self.u16()?), 0),
                0xdf => (self.len32()?.saturating_mul(2), 0),
            };
            self.take(bytes)?;
            // Every value takes at least a byte: a count beyond what is left is a lie.
            pending = pending.saturating_add(items);
            if pending > self.remaining() {
                return Err(PayloadError::Incomplete);
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Helpers over Value

/// An ordered map with string keys (`&str`, `String`, ...), in the order given.
pub fn map<K: AsRef<str>>(pairs: impl IntoIterator<Item = (K, Value)>) -> Value {
    Value::Map(
        pairs
            .into_iter()
            .map(|(k, v)| (Value::from(k.as_ref()), v))
            .collect(),
    )
}

fn key_is(k: &Value, key: &str) -> bool {
    match k {
        Value::String(s) => s.as_bytes() == key.as_bytes(),
        Value::Binary(b) => b.as_slice() == key.as_bytes(),
        _ => false,
    }
}

/// Value of the first entry whose key is the string `key` (None if `m` is not a map).
pub fn get<'a>(m: &'a Value, key: &str) -> Option<&'a Value> {
    match m {
        Value::Map(pairs) => pairs.iter().find(|(k, _)| key_is(k, key)).map(|(_, v)| v),
        _ => None,
    }
}

/// Like [`get`], for values that are valid UTF-8 strings.
pub fn get_str<'a>(m: &'a Value, key: &str) -> Option<&'a str> {
    get(m, key).and_then(Value::as_str)
}

/// The bytes of a bin or str value: Salt sends some byte fields (`load`, `tok`, `sig`,
/// keys) as either, depending on the sender's msgpack settings.
pub fn bytes_of(v: &Value) -> Option<&[u8]> {
    match v {
        Value::Binary(b) => Some(b),
        Value::String(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// Python truthiness of a value (`bool(x)`).
pub fn py_truthy(v: &Value) -> bool {
    match v {
        Value::Nil => false,
        Value::Boolean(b) => *b,
        Value::Integer(i) => i.as_i64() != Some(0) && i.as_u64() != Some(0),
        Value::F32(f) => *f != 0.0,
        Value::F64(f) => *f != 0.0,
        Value::String(s) => !s.as_bytes().is_empty(),
        Value::Binary(b) => !b.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Map(m) => !m.is_empty(),
        Value::Ext(..) => true,
    }
}

/// Python truthiness of a JSON value.
pub fn json_truthy(v: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match v {
        J::Null => false,
        J::Bool(b) => *b,
        J::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        J::String(s) => !s.is_empty(),
        J::Array(a) => !a.is_empty(),
        J::Object(m) => !m.is_empty(),
    }
}

/// Replace the value of `key` in place, or append the entry. No-op if `m` is not a map.
pub fn set(m: &mut Value, key: &str, v: Value) {
    if let Value::Map(pairs) = m {
        if let Some(slot) = pairs.iter_mut().find(|(k, _)| key_is(k, key)) {
            slot.1 = v;
        } else {
            pairs.push((Value::from(key), v));
        }
    }
}

/// Python's `d[key] = v` on a map's pairs: the entry whose key is `key` replaced in place, or
/// a new one at the end.
pub fn upsert(pairs: &mut Vec<(Value, Value)>, key: Value, v: Value) {
    match pairs.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = v,
        None => pairs.push((key, v)),
    }
}

/// Remove the entry for `key`, keeping the order of the others.
pub fn remove(m: &mut Value, key: &str) -> Option<Value> {
    match m {
        Value::Map(pairs) => {
            let idx = pairs.iter().position(|(k, _)| key_is(k, key))?;
            Some(pairs.remove(idx).1)
        }
        _ => None,
    }
}

/// Text of a datetime ext (`20240102T03:04:05.678901`), if `v` is one.
pub fn datetime_text(v: &Value) -> Option<&str> {
    match v {
        Value::Ext(EXT_DATETIME, data) => std::str::from_utf8(data).ok(),
        _ => None,
    }
}

/// Convert to JSON the way Salt's outputters see loads: binaries become (lossy)
/// text, ext 78 becomes its datetime text, integers keep u64/i64, map keys are
/// stringified. Non-finite floats become null.
pub fn to_json(v: &Value) -> serde_json::Value {
    serde_json::to_value(AsJson(v)).unwrap_or(serde_json::Value::Null)
}

/// JSON text of `v`, converted as [`to_json`] converts it (without building the JSON tree).
pub fn to_json_text(v: &Value) -> String {
    serde_json::to_string(&AsJson(v)).unwrap_or_else(|_| "null".into())
}

/// A Value serialized as JSON the way [`to_json`] converts it, written straight to any serde
/// serializer.
pub struct AsJson<'a>(pub &'a Value);

impl serde::Serialize for AsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Nil => s.serialize_unit(),
            Value::Boolean(b) => s.serialize_bool(*b),
            Value::Integer(i) => match (i.as_u64(), i.as_i64()) {
                (Some(u), _) => s.serialize_u64(u),
                (None, Some(n)) => s.serialize_i64(n),
                (None, None) => s.serialize_unit(),
            },
            Value::F32(f) => serialize_float(s, f64::from(*f)),
            Value::F64(f) => serialize_float(s, *f),
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&AsJson(item))?;
                }
                seq.end()
            }
            Value::Map(pairs) => {
                let mut m = s.serialize_map(Some(pairs.len()))?;
                for (k, val) in pairs {
                    m.serialize_entry(&json_key(k), &AsJson(val))?;
                }
                m.end()
            }
            other => s.serialize_str(&text_of(other).unwrap_or_default()),
        }
    }
}

fn serialize_float<S: serde::Serializer>(s: S, f: f64) -> Result<S::Ok, S::Error> {
    if f.is_finite() {
        s.serialize_f64(f)
    } else {
        s.serialize_unit()
    }
}

/// The text JSON gives a string, a binary or an ext (lossy UTF-8); `None` for other kinds.
fn text_of(v: &Value) -> Option<std::borrow::Cow<'_, str>> {
    let bytes = match v {
        Value::String(s) => match s.as_str() {
            Some(text) => return Some(text.into()),
            None => s.as_bytes(),
        },
        Value::Binary(b) => b,
        Value::Ext(_, data) => data,
        _ => return None,
    };
    Some(String::from_utf8_lossy(bytes))
}

/// A map key as JSON text: strings as they are, anything else as its JSON text.
fn json_key(k: &Value) -> std::borrow::Cow<'_, str> {
    text_of(k).unwrap_or_else(|| to_json_text(k).into())
}

/// Convert JSON into a Value: objects become ordered string-keyed maps,
/// numbers stay u64/i64 when integral, otherwise f64.
pub fn from_json(v: &serde_json::Value) -> Value {
    FromJson::deserialize_from(v).unwrap_or(Value::Nil)
}

/// Parse JSON text into a Value as [`from_json`] converts it, without the JSON tree in
/// between (serde_json's own nesting limit applies).
pub fn from_json_text(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = <FromJson as serde::Deserialize>::deserialize(&mut de)?.0;
    de.end()?;
    Ok(v)
}

/// A Value read from any self-describing serde format (JSON) as [`from_json`] reads it; as a
/// field of a `#[derive(Deserialize)]` struct it reads that field alone.
#[derive(Debug, Clone, PartialEq)]
pub struct FromJson(pub Value);

impl FromJson {
    fn deserialize_from(v: &serde_json::Value) -> Result<Value, serde_json::Error> {
        <FromJson as serde::Deserialize>::deserialize(v).map(|v| v.0)
    }
}

impl<'de> serde::Deserialize<'de> for FromJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor).map(FromJson)
    }
}

struct JsonVisitor;

impl<'de> serde::de::Visitor<'de> for JsonVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Nil)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Nil)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Boolean(b))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::from(u))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::from(i))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Value::F64(f))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::from(s))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::from(s))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(FromJson(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let mut pairs: Vec<(Value, Value)> =
            Vec::with_capacity(m.size_hint().unwrap_or(0).min(4096));
        while let Some((k, FromJson(v))) = m.next_entry::<String, _>()? {
            pairs.push((Value::from(k), v));
        }
        Ok(Value::Map(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rich_value() -> Value {
        Value::Map(vec![
            (Value::from("text"), Value::from("h\u{e9}llo \"q\"\n")),
            (
                Value::from("bad utf-8"),
                Value::Binary(vec![0x66, 0xff, 0x6f]),
            ),
            (Value::from("bin"), Value::Binary(b"plain".to_vec())),
            (
                Value::from("stamp"),
                Value::Ext(EXT_DATETIME, b"20260102T03:04:05.000006".to_vec()),
            ),
            (Value::from("neg"), Value::from(-70000i64)),
            (Value::from("big"), Value::from(u64::MAX)),
            (Value::from("small"), Value::from(-3i8)),
            (Value::from("f32"), Value::F32(1.5)),
            (Value::from("nan"), Value::F64(f64::NAN)),
            (Value::from("nil"), Value::Nil),
            (Value::from(7), Value::from(true)),
            (Value::from(1.25), Value::Array(vec![])),
            (Value::Nil, Value::from("nil key")),
            (Value::Array(vec![Value::from(1)]), Value::from("list key")),
            (Value::from("dup"), Value::from(1)),
            (Value::from("dup"), Value::from(2)),
            (
                Value::from("nested"),
                Value::Array(vec![Value::Map(vec![(
                    Value::from("a"),
                    Value::Array(vec![Value::from(false)]),
                )])]),
            ),
        ])
    }

    #[test]
    fn map_str_and_check_walk_without_decoding() {
        let packed = dumps(&rich_value());
        assert_eq!(map_str(&packed, "text"), Some("h\u{e9}llo \"q\"\n"));
        assert_eq!(map_str(&packed, "neg"), None, "not a string");
        assert_eq!(map_str(&packed, "absent"), None);
        assert_eq!(map_str(&dumps(&Value::from("text")), "text"), None);
        assert_eq!(check(&packed), Ok(()));
        assert_eq!(
            check(&packed[..packed.len() - 1]),
            Err(PayloadError::Truncated)
        );
        assert_eq!(
            check(&[packed.as_slice(), &[0xc0]].concat()),
            Err(PayloadError::TrailingBytes(1))
        );
        assert_eq!(check(&[0xc1]), Err(PayloadError::BadMarker(0xc1)));
    }

    #[test]
    fn json_straight_from_msgpack_or_through_values_is_the_same() {
        let packed = dumps(&rich_value());
        assert_eq!(
            loads_json(&packed).unwrap(),
            to_json(&loads(&packed).unwrap())
        );
        assert_eq!(
            loads_json(&dumps_bin(&rich_value())).unwrap(),
            to_json(&loads(&packed).unwrap())
        );
        assert_eq!(
            loads_json(&packed[..packed.len() - 1]),
            Err(PayloadError::Truncated)
        );
        assert_eq!(loads_json(&[]), Err(PayloadError::Empty));
        let deep = [vec![0x91u8; MAX_DEPTH + 1], vec![0xc0]].concat();
        assert_eq!(loads_json(&deep), Err(PayloadError::TooDeep));
    }

    #[test]
    fn json_text_both_ways_is_what_to_json_and_from_json_give() {
        let v = rich_value();
        let text = to_json_text(&v);
        let tree = to_json(&v);
        // Text and tree agree, except that the tree keeps one of two equal keys.
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            tree
        );
        assert_eq!(from_json_text(&text).unwrap(), {
            let Value::Map(mut pairs) = from_json(&tree) else {
                unreachable!()
            };
            let dup = pairs
                .iter()
                .position(|(k, _)| k.as_str() == Some("dup"))
                .unwrap();
            pairs.insert(dup, (Value::from("dup"), Value::from(1)));
            Value::Map(pairs)
        });
        assert_eq!(
            from_json_text("[1, -2, 2.5, null, {\"k\": \"v\"}]").unwrap(),
            Value::Array(vec![
                Value::from(1),
                Value::from(-2),
                Value::F64(2.5),
                Value::Nil,
                Value::Map(vec![(Value::from("k"), Value::from("v"))]),
            ])
        );
        assert!(from_json_text("[1] x").is_err());
        assert!(
            from_json_text(&"[".repeat(200)).is_err(),
            "nesting is bounded"
        );
    }

    #[test]
    fn clear_cmd_reads_the_command_of_clear_requests_only() {
        let auth = dumps(&map(vec![
            ("enc", Value::from("clear")),
            (
                "load",
                map(vec![
                    ("id", Value::from("web1")),
                    ("pub", Value::from("-----BEGIN PUBLIC KEY-----")),
                    ("token", Value::Binary(vec![0xc1; 300])),
                    (
                        "nested",
                        Value::Array(vec![map(vec![("cmd", Value::from("no"))])]),
                    ),
                    ("cmd", Value::from("_auth")),
                    ("nonce", Value::from(1.5)),
                ]),
            ),
            ("version", Value::from(3)),
        ]));
        assert_eq!(clear_cmd(&auth), Some(&b"_auth"[..]));
        // The envelope's keys in any order.
        let load_first = dumps(&map(vec![
            ("load", map(vec![("cmd", Value::from("publish"))])),
            ("enc", Value::from("clear")),
        ]));
        assert_eq!(clear_cmd(&load_first), Some(&b"publish"[..]));
        let aes = dumps(&map(vec![
            ("enc", Value::from("aes")),
            ("load", map(vec![("cmd", Value::from("_auth"))])),
        ]));
        assert_eq!(clear_cmd(&aes), None);
        let ciphertext = dumps(&map(vec![
            ("enc", Value::from("clear")),
            ("load", Value::Binary(b"\xa3cmd\xa5_auth".to_vec())),
        ]));
        assert_eq!(clear_cmd(&ciphertext), None);
        // Truncated, trailing bytes, not a map, a lying length, a bad marker.
        assert_eq!(clear_cmd(&auth[..auth.len() - 1]), None);
        assert_eq!(clear_cmd(&[auth.as_slice(), b"x"].concat()), None);
        assert_eq!(clear_cmd(&dumps(&Value::from("_auth"))), None);
        assert_eq!(clear_cmd(&[0xdf, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(
            clear_cmd(&[0x81, 0xa1, b'x', 0xdd, 0xff, 0xff, 0xff, 0xff]),
            None
        );
        assert_eq!(clear_cmd(&[0x81, 0xa1, b'x', 0xc1]), None);
        assert_eq!(clear_cmd(&[]), None);
    }

    #[test]
    fn clear_cmd_skips_deep_nesting_without_recursion() {
        // A million nested arrays inside the load: skipped in a loop.
        let mut load = vec![
            0x82, 0xa3, b'c', b'm', b'd', 0xa5, b'_', b'a', b'u', b't', b'h', 0xa1, b'x',
        ];
        load.extend(std::iter::repeat_n(0x91, 1_000_000));
        load.push(0xc0);
        let mut body = vec![
            0x82, 0xa3, b'e', b'n', b'c', 0xa5, b'c', b'l', b'e', b'a', b'r', 0xa4,
        ];
        body.extend_from_slice(b"load");
        body.extend(load);
        assert_eq!(clear_cmd(&body), Some(&b"_auth"[..]));
    }

    fn hex(b: &[u8]) -> String {
        hex::encode(b)
    }

    #[test]
    fn int_widths() {
        let cases: &[(Value, &str)] = &[
            (Value::from(0u8), "00"),
            (Value::from(127u8), "7f"),
            (Value::from(128u8), "cc80"),
            (Value::from(256u16), "cd0100"),
            (Value::from(65536u32), "ce00010000"),
            (Value::from(1u64 << 32), "cf0000000100000000"),
            (Value::from(-1i8), "ff"),
            (Value::from(-32i8), "e0"),
            (Value::from(-33i8), "d0df"),
            (Value::from(-129i16), "d1ff7f"),
            (Value::from(-32769i32), "d2ffff7fff"),
            (Value::from(i64::MIN), "d38000000000000000"),
        ];
        for (v, want) in cases {
            assert_eq!(hex(&dumps(v)), *want, "{v:?}");
            assert_eq!(&loads(&dumps(v)).unwrap(), v);
        }
    }

    #[test]
    fn string_families() {
        let s32 = "x".repeat(32);
        assert_eq!(&hex(&dumps(&Value::from(s32.as_str())))[..6], "da0020");
        assert_eq!(&hex(&dumps_bin(&Value::from(s32.as_str())))[..4], "d920");
        let big = "y".repeat(70000);
        assert_eq!(&hex(&dumps(&Value::from(big.as_str())))[..10], "db00011170");
        let bin = Value::Binary(vec![0xff; 3]);
        assert_eq!(hex(&dumps(&bin)), "a3ffffff");
        assert_eq!(hex(&dumps_bin(&bin)), "c403ffffff");
        assert_eq!(loads(&dumps(&bin)).unwrap(), bin);
        // bin holding UTF-8 comes back as a string
        assert_eq!(
            loads(&hex::decode("c4026869").unwrap()).unwrap(),
            Value::from("hi")
        );
        assert_eq!(
            loads(&hex::decode("d9026869").unwrap()).unwrap(),
            Value::from("hi")
        );
    }

    #[test]
    fn floats_and_ext() {
        assert_eq!(hex(&dumps(&Value::F32(0.5))), "cb3fe0000000000000");
        assert_eq!(
            loads(&hex::decode("ca3f000000").unwrap()).unwrap(),
            Value::F64(0.5)
        );
        let e = Value::Ext(5, vec![1, 2, 3, 4]);
        assert_eq!(hex(&dumps(&e)), "d60501020304");
        assert_eq!(loads(&dumps(&e)).unwrap(), e);
        let e3 = Value::Ext(-1, vec![9; 3]);
        assert_eq!(hex(&dumps(&e3)), "c703ff090909");
        assert_eq!(loads(&dumps(&e3)).unwrap(), e3);
        let long = Value::Ext(1, vec![0; 300]);
        assert_eq!(&hex(&dumps(&long))[..8], "c8012c01");
        assert_eq!(loads(&dumps(&long)).unwrap(), long);
    }

    #[test]
    fn containers_keep_order() {
        let v = map(vec![
            ("z", Value::from(1)),
            ("a", Value::Array(vec![Value::Nil, Value::Boolean(true)])),
        ]);
        let b = dumps(&v);
        assert_eq!(hex(&b), "82a17a01a16192c0c3");
        assert_eq!(loads(&b).unwrap(), v);
        let arr = Value::Array((0..20).map(Value::from).collect());
        assert_eq!(&hex(&dumps(&arr))[..6], "dc0014");
        assert_eq!(loads(&dumps(&arr)).unwrap(), arr);
        let m = Value::Map((0..20).map(|i| (Value::from(i), Value::Nil)).collect());
        assert_eq!(&hex(&dumps(&m))[..6], "de0014");
        assert_eq!(loads(&dumps(&m)).unwrap(), m);
    }

    #[test]
    fn errors() {
        assert_eq!(loads(&[]), Err(PayloadError::Empty));
        assert_eq!(loads(&[0xc1]), Err(PayloadError::BadMarker(0xc1)));
        assert_eq!(loads(&[0x01, 0x02]), Err(PayloadError::TrailingBytes(1)));
        assert_eq!(loads(&[0xa3, b'a']), Err(PayloadError::Truncated));
        assert_eq!(loads_prefix(&[0xa3, b'a']), Err(PayloadError::Incomplete));
        assert_eq!(loads_prefix(&[0x92, 0x01]), Err(PayloadError::Incomplete));
        assert_eq!(loads_prefix(&[0x01, 0x02]), Ok((Value::from(1), 1)));
        // huge declared sizes fail without allocating
        for h in [
            "ddffffffff",
            "dfffffffff",
            "dbffffffff00",
            "c6ffffffff",
            "c9ffffffff01",
        ] {
            assert_eq!(
                loads(&hex::decode(h).unwrap()),
                Err(PayloadError::Truncated),
                "{h}"
            );
        }
        let deep = vec![0x91u8; 100_000];
        assert_eq!(loads(&deep), Err(PayloadError::TooDeep));
        let mut ok = vec![0x91u8; MAX_DEPTH - 1];
        ok.push(0xc0);
        assert!(loads(&ok).is_ok());
    }

    #[test]
    fn helpers() {
        let mut m = map(vec![("a", Value::from(1)), ("b", Value::from("x"))]);
        assert_eq!(get_str(&m, "b"), Some("x"));
        assert_eq!(get(&m, "c"), None);
        assert_eq!(get(&Value::Nil, "a"), None);
        set(&mut m, "a", Value::from(2));
        set(&mut m, "c", Value::Nil);
        assert_eq!(hex(&dumps(&m)), "83a16102a162a178a163c0");
        assert_eq!(remove(&mut m, "a"), Some(Value::from(2)));
        assert_eq!(remove(&mut m, "a"), None);
        assert_eq!(hex(&dumps(&m)), "82a162a178a163c0");
    }

    #[test]
    fn json_conversion() {
        let v = Value::Map(vec![
            (Value::from(1), Value::Binary(vec![b'o', b'k', 0xff])),
            (Value::from("u"), Value::from(u64::MAX)),
            (Value::from("i"), Value::from(-5)),
            (Value::from("f"), Value::F64(0.5)),
            (
                Value::from("d"),
                Value::Ext(EXT_DATETIME, b"20240102T03:04:05.678901".to_vec()),
            ),
        ]);
        let j = to_json(&v);
        assert_eq!(
            j.to_string(),
            r#"{"1":"ok�","u":18446744073709551615,"i":-5,"f":0.5,"d":"20240102T03:04:05.678901"}"#
        );
        let back = from_json(&serde_json::json!({"a": [1, -2, 1.5, null, true, "s"]}));
        assert_eq!(
            back,
            map(vec![(
                "a",
                Value::Array(vec![
                    Value::from(1),
                    Value::from(-2),
                    Value::F64(1.5),
                    Value::Nil,
                    Value::Boolean(true),
                    Value::from("s"),
                ])
            )])
        );
    }

    #[test]
    fn bounded_loads_refuse_element_floods_before_allocating() {
        // 1 Mi nils in one array32: 1 MiB of input, 32 MiB of values.
        let mut flood = vec![0xdd];
        flood.extend_from_slice(&(1u32 << 20).to_be_bytes());
        flood.resize(5 + (1 << 20), 0xc0);
        assert_eq!(loads_bounded(&flood), Err(PayloadError::TooManyElements));
        // The same as a map of nil → nil.
        let mut flood = vec![0xdf];
        flood.extend_from_slice(&(1u32 << 19).to_be_bytes());
        flood.resize(5 + (1 << 20), 0xc0);
        assert_eq!(loads_bounded(&flood), Err(PayloadError::TooManyElements));
        // The unbounded decoder still reads it (it is valid msgpack).
        assert!(loads(&flood).is_ok());
        // Dense payloads of any size pass: one big string.
        let big = dumps(&Value::from("x".repeat(4 << 20)));
        assert!(loads_bounded(&big).is_ok());
        // Small payloads of small elements pass (a typical load).
        let load = map(vec![
            ("cmd", Value::from("_auth")),
            ("id", Value::from("m1")),
            ("list", Value::Array((0..1000).map(Value::from).collect())),
        ]);
        assert_eq!(loads_bounded(&dumps(&load)), Ok(load));
        // Errors as loads gives them.
        assert_eq!(loads_bounded(&[]), Err(PayloadError::Empty));
        assert_eq!(loads_bounded(&[0x92, 0xc0]), Err(PayloadError::Truncated));
        assert_eq!(
            loads_bounded(&[0xc0, 0xc0]),
            Err(PayloadError::TrailingBytes(1))
        );
    }
}
