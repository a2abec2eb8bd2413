//! The master event bus framing, byte exact (Salt 3007, `ipc_mode: ipc`).
//!
//! * An event body is `tag` + `"\n\n"` + msgpack(data).
//! * Subscribers read `master_event_pub.ipc`: a bare stream of msgpack maps
//!   `{"head": {}, "body": <bin body>}` ([`pub_frame`], [`PubDecoder`]).
//! * Publishers write `master_event_pull.ipc`: the same map behind a big-endian `u32`
//!   length ([`pull_frame`], [`PullDecoder`]).
//!
//! The decoders never trust a declared size: a frame larger than `max_frame` is an error,
//! and the byte scanner stops as soon as the data cannot fit.

use std::collections::VecDeque;

use regex::Regex;
use rmpv::Value;

use crate::payload::Token;
use crate::target::fnmatch;

/// The tag of the event Brine's tools fire through the master's pull socket, and wait to see
/// come back, to know that the master publishes to them. Readers of the bus skip it.
pub const LISTENER_PROBE_TAG: &str = "salt/event/listener/ready";

/// Separates the tag from the packed data in an event body.
pub const TAGEND: &[u8] = b"\n\n";

/// Deepest nesting accepted when decoding event data.
const MAX_DEPTH: usize = 512;

/// Event framing and body errors. After a decoder error the stream is out of sync: drop
/// the connection.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// A frame is larger than the decoder's limit.
    #[error("event frame of {size} bytes exceeds the {max} byte limit")]
    TooLarge {
        /// Declared or scanned size so far.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Bytes that are not msgpack (or not the expected msgpack).
    #[error("malformed event frame: {0}")]
    Malformed(String),
    /// The frame map has no usable `body`.
    #[error("event frame has no binary \"body\"")]
    MissingBody,
    /// The body has no `"\n\n"` between tag and data.
    #[error("event body has no tag separator")]
    NoTagEnd,
    /// The tag is not UTF-8.
    #[error("event tag is not valid UTF-8")]
    BadTag,
    /// The data after the tag does not decode as one msgpack value.
    #[error("event data does not decode: {0}")]
    BadData(String),
    /// The decoder already failed.
    #[error("event stream already failed")]
    Poisoned,
}

/// Event body: tag UTF-8 + `"\n\n"` + msgpack(data) in the `use_bin_type=True` format.
pub fn pack_body(tag: &str, data: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(tag.len() + 64);
    out.extend_from_slice(tag.as_bytes());
    out.extend_from_slice(TAGEND);
    write_value(&mut out, data);
    out
}

fn write_value(out: &mut Vec<u8>, v: &Value) {
    // Writing into a Vec cannot fail.
    rmpv::encode::write_value(out, v).expect("writing msgpack into a Vec<u8> cannot fail");
}

/// Splits a body at the first `"\n\n"` and decodes the data (exactly one msgpack value).
/// Strings that are not valid UTF-8 come back as `Value::Binary`.
pub fn unpack_body(body: &[u8]) -> Result<(String, Value), EventError> {
    let (tag, mut rest) = split_body(body)?;
    let data = rmpv::decode::read_value_with_max_depth(&mut rest, MAX_DEPTH)
        .map_err(|e| EventError::BadData(e.to_string()))?;
    if !rest.is_empty() {
        return Err(EventError::BadData(format!(
            "{} bytes after the data",
            rest.len()
        )));
    }
    Ok((tag.to_owned(), normalize_strings(data)))
}

/// An event body's tag and its packed data (not decoded).
pub fn split_body(body: &[u8]) -> Result<(&str, &[u8]), EventError> {
    let split = body
        .windows(TAGEND.len())
        .position(|w| w == TAGEND)
        .ok_or(EventError::NoTagEnd)?;
    let tag = std::str::from_utf8(&body[..split]).map_err(|_| EventError::BadTag)?;
    Ok((tag, &body[split + TAGEND.len()..]))
}

/// Turns `String` values (and keys) holding invalid UTF-8 into `Binary`.
fn normalize_strings(v: Value) -> Value {
    match v {
        Value::String(s) if s.as_str().is_none() => Value::Binary(s.into_bytes()),
        Value::Array(items) => Value::Array(items.into_iter().map(normalize_strings).collect()),
        Value::Map(pairs) => Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (normalize_strings(k), normalize_strings(v)))
                .collect(),
        ),
        other => other,
    }
}

/// The frame map `{"head": {}, "body": <bin body>}`.
fn frame_map(body: &[u8]) -> Vec<u8> {
    let frame = Value::Map(vec![
        (Value::from("head"), Value::Map(Vec::new())),
        (Value::from("body"), Value::Binary(body.to_vec())),
    ]);
    let mut out = Vec::with_capacity(body.len() + 20);
    write_value(&mut out, &frame);
    out
}

/// Frame sent to subscribers on `master_event_pub.ipc`: the bare msgpack map.
pub fn pub_frame(body: &[u8]) -> Vec<u8> {
    frame_map(body)
}

/// Frame written by publishers to `master_event_pull.ipc`: `u32` big-endian length + map.
pub fn pull_frame(body: &[u8]) -> Vec<u8> {
    let map = frame_map(body);
    let len = u32::try_from(map.len()).expect("event frames are far below 4 GiB");
    let mut out = Vec::with_capacity(map.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&map);
    out
}

/// Resumable "where does this msgpack object end" scanner: it only counts items still to
/// read, so it can stop at any byte and continue when more arrive.
#[derive(Debug, Default)]
struct Scanner {
    /// Bytes of the object consumed so far.
    pos: usize,
    /// Items still to read (an array of n adds n, a map adds 2n).
    pending: u64,
    started: bool,
}

impl Scanner {
    /// `Ok(Some(len))` once `buf[..len]` holds one whole object, `Ok(None)` if more bytes
    /// are needed.
    fn scan(&mut self, buf: &[u8], max: usize) -> Result<Option<usize>, EventError> {
        if !self.started {
            self.started = true;
            self.pending = 1;
        }
        while self.pending > 0 {
            let Some(&marker) = buf.get(self.pos) else {
                return Ok(None);
            };
            let (header, payload, children) = match marker {
                0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (1, 0, 0),
                0x80..=0x8f => (1, 0, 2 * u64::from(marker & 0x0f)),
                0x90..=0x9f => (1, 0, u64::from(marker & 0x0f)),
                0xa0..=0xbf => (1, usize::from(marker & 0x1f), 0),
                0xc1 => return Err(EventError::Malformed("reserved marker 0xc1".into())),
                0xc4 | 0xd9 => match self.len_field(buf, 1)? {
                    Some(n) => (2, n, 0),
                    None => return Ok(None),
                },
                0xc5 | 0xda => match self.len_field(buf, 2)? {
                    Some(n) => (3, n, 0),
                    None => return Ok(None),
                },
                0xc6 | 0xdb => match self.len_field(buf, 4)? {
                    Some(n) => (5, n, 0),
                    None => return Ok(None),
                },
                0xc7 => match self.len_field(buf, 1)? {
                    Some(n) => (3, n, 0),
                    None => return Ok(None),
                },
                0xc8 => match self.len_field(buf, 2)? {
                    Some(n) => (4, n, 0),
                    None => return Ok(None),
                },
                0xc9 => match self.len_field(buf, 4)? {
                    Some(n) => (6, n, 0),
                    None => return Ok(None),
                },
                0xca => (5, 0, 0),
                0xcb => (9, 0, 0),
                0xcc | 0xd0 => (2, 0, 0),
                0xcd | 0xd1 => (3, 0, 0),
                0xce | 0xd2 => (5, 0, 0),
                0xcf | 0xd3 => (9, 0, 0),
                0xd4 => (3, 0, 0),
                0xd5 => (4, 0, 0),
                0xd6 => (6, 0, 0),
                0xd7 => (10, 0, 0),
                0xd8 => (18, 0, 0),
                0xdc => match self.len_field(buf, 2)? {
                    Some(n) => (3, 0, n as u64),
                    None => return Ok(None),
                },
                0xdd => match self.len_field(buf, 4)? {
                    Some(n) => (5, 0, n as u64),
                    None => return Ok(None),
                },
                0xde => match self.len_field(buf, 2)? {
                    Some(n) => (3, 0, 2 * n as u64),
                    None => return Ok(None),
                },
                0xdf => match self.len_field(buf, 4)? {
                    Some(n) => (5, 0, 2 * n as u64),
                    None => return Ok(None),
                },
            };
            let end = self.pos + header + payload;
            // Every child needs at least one more byte.
            let least = (end as u64).saturating_add(children + self.pending - 1);
            if least > max as u64 {
                return Err(EventError::TooLarge {
                    size: usize::try_from(least).unwrap_or(usize::MAX),
                    max,
                });
            }
            if buf.len() < end {
                // Header seen but payload incomplete: wait without consuming.
                return Ok(None);
            }
            self.pos = end;
            self.pending = self.pending - 1 + children;
        }
        Ok(Some(self.pos))
    }

    /// Reads the big-endian length that follows the marker at `self.pos`.
    fn len_field(&self, buf: &[u8], width: usize) -> Result<Option<usize>, EventError> {
        let start = self.pos + 1;
        let Some(bytes) = buf.get(start..start + width) else {
            return Ok(None);
        };
        let n = bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        Ok(Some(n))
    }
}

/// Takes the `body` out of a complete frame map (`{"head": ..., "body": <bin>}`).
fn body_of(frame: &[u8]) -> Result<Vec<u8>, EventError> {
    crate::payload::check(frame).map_err(|e| EventError::Malformed(e.to_string()))?;
    if !matches!(frame.first(), Some(0x80..=0x8f | 0xde | 0xdf)) {
        return Err(EventError::Malformed("frame is not a map".into()));
    }
    // Found without decoding the frame: the body (a bin of up to the frame limit) is copied
    // once, and nothing else is built.
    let body = crate::payload::map_field(frame, "body").ok_or(EventError::MissingBody)?;
    match crate::payload::Tokens::new(body).next() {
        // Releases that packed without use_bin_type sent the body as a raw str.
        Ok(Token::Raw(body)) => Ok(body.to_vec()),
        _ => Err(EventError::MissingBody),
    }
}

/// Shared buffering: bytes not yet returned, consumed from the front.
#[derive(Debug)]
struct Buffer {
    bytes: VecDeque<u8>,
    max_frame: usize,
    poisoned: bool,
}

impl Buffer {
    fn new(max_frame: usize) -> Self {
        Buffer {
            bytes: VecDeque::new(),
            max_frame,
            poisoned: false,
        }
    }

    fn contiguous(&mut self) -> &[u8] {
        self.bytes.make_contiguous()
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let (front, back) = self.bytes.as_slices();
        let mut out = Vec::with_capacity(n);
        out.extend_from_slice(&front[..n.min(front.len())]);
        out.extend_from_slice(&back[..n - out.len()]);
        self.bytes.drain(..n);
        out
    }

    fn fail<T>(&mut self, err: EventError) -> Result<T, EventError> {
        self.poisoned = true;
        self.bytes.clear();
        Err(err)
    }
}

/// Decoder for the pull side: `u32` BE length + map, or (first byte a map marker
/// 0x81..=0x8f or 0xde) the bare map older releases wrote.
#[derive(Debug)]
pub struct PullDecoder {
    buf: Buffer,
    scanner: Option<Scanner>,
}

impl PullDecoder {
    /// A decoder refusing frames over `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        PullDecoder {
            buf: Buffer::new(max_frame),
            scanner: None,
        }
    }

    /// Adds received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if !self.buf.poisoned {
            self.buf.bytes.extend(bytes);
        }
    }

    /// The next complete event body, `Ok(None)` if more bytes are needed.
    pub fn next_body(&mut self) -> Result<Option<Vec<u8>>, EventError> {
        if self.buf.poisoned {
            return Err(EventError::Poisoned);
        }
        let max = self.buf.max_frame;
        let Some(&first) = self.buf.bytes.front() else {
            return Ok(None);
        };
        if matches!(first, 0x81..=0x8f | 0xde) {
            let scanner = self.scanner.get_or_insert_with(Scanner::default);
            let scanned = scanner.scan(self.buf.contiguous(), max);
            return match scanned {
                Ok(Some(len)) => {
                    self.scanner = None;
                    let frame = self.buf.take(len);
                    body_of(&frame).map(Some).or_else(|e| self.buf.fail(e))
                }
                Ok(None) => Ok(None),
                Err(e) => self.buf.fail(e),
            };
        }
        if self.buf.bytes.len() < 4 {
            return Ok(None);
        }
        let head = self.buf.contiguous();
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len > max {
            return self.buf.fail(EventError::TooLarge { size: len, max });
        }
        if self.buf.bytes.len() < 4 + len {
            return Ok(None);
        }
        let frame = self.buf.take(4 + len);
        body_of(&frame[4..]).map(Some).or_else(|e| self.buf.fail(e))
    }
}

/// Decoder for the pub side: a bare stream of msgpack maps.
#[derive(Debug)]
pub struct PubDecoder {
    buf: Buffer,
    scanner: Scanner,
}

impl PubDecoder {
    /// A decoder refusing frames over `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        PubDecoder {
            buf: Buffer::new(max_frame),
            scanner: Scanner::default(),
        }
    }

    /// Adds received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if !self.buf.poisoned {
            self.buf.bytes.extend(bytes);
        }
    }

    /// The next complete event body, `Ok(None)` if more bytes are needed.
    pub fn next_body(&mut self) -> Result<Option<Vec<u8>>, EventError> {
        if self.buf.poisoned {
            return Err(EventError::Poisoned);
        }
        let Some(&first) = self.buf.bytes.front() else {
            return Ok(None);
        };
        if !matches!(first, 0x80..=0x8f | 0xde | 0xdf) {
            return self.buf.fail(EventError::Malformed(format!(
                "frame starts with 0x{first:02x}, not a map"
            )));
        }
        let max = self.buf.max_frame;
        let scanned = self.scanner.scan(self.buf.contiguous(), max);
        match scanned {
            Ok(Some(len)) => {
                self.scanner = Scanner::default();
                let frame = self.buf.take(len);
                body_of(&frame).map(Some).or_else(|e| self.buf.fail(e))
            }
            Ok(None) => Ok(None),
            Err(e) => self.buf.fail(e),
        }
    }
}

/// `SaltEvent.get_event` tag filtering: `startswith` (Salt's default), `endswith`, `find`
/// (substring), `regex` (`^` prepended, then searched) and `fnmatch`. An unknown
/// `match_type` or an invalid regex matches nothing.
pub fn tag_matches(match_type: &str, pattern: &str, tag: &str) -> bool {
    match match_type {
        "startswith" => tag.starts_with(pattern),
        "endswith" => tag.ends_with(pattern),
        "find" => tag.contains(pattern),
        "regex" => Regex::new(&format!("^{pattern}")).is_ok_and(|re| re.is_match(tag)),
        "fnmatch" => fnmatch(pattern, tag),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_data() -> Value {
        Value::Map(vec![
            (Value::from("result"), Value::from(true)),
            (Value::from("act"), Value::from("accept")),
            (Value::from("id"), Value::from("m2")),
            (Value::from("n"), Value::from(200)),
            (Value::from("neg"), Value::from(-3)),
            (Value::from("f"), Value::F64(1.5)),
            (Value::from("raw"), Value::Binary(vec![0, 1, 2])),
            (
                Value::from("_stamp"),
                Value::from("2026-11-22T10:17:15.646785"),
            ),
        ])
    }

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s).expect("valid hex")
    }

    #[test]
    fn body_round_trip() {
        let body = pack_body("salt/auth", &sample_data());
        assert!(body.starts_with(b"salt/auth\n\n\x88"));
        let (tag, data) = unpack_body(&body).unwrap();
        assert_eq!(tag, "salt/auth");
        assert_eq!(data, sample_data());
    }

    /// Bytes from Python: `salt.utils.event.SaltEvent.pack("salt/job/1/new",
    /// {"a": 1, "b": [True, None], "s": "x"*40, "big": 70000, "f": 1.5, "bin": b"\x00"})`.
    #[test]
    fn body_bytes_match_python() {
        let data = Value::Map(vec![
            (Value::from("a"), Value::from(1)),
            (
                Value::from("b"),
                Value::Array(vec![Value::from(true), Value::Nil]),
            ),
            (Value::from("s"), Value::from("x".repeat(40))),
            (Value::from("big"), Value::from(70000)),
            (Value::from("f"), Value::F64(1.5)),
            (Value::from("bin"), Value::Binary(vec![0])),
        ]);
        let expected = [
            b"salt/job/1/new\n\n".to_vec(),
            hex("86a16101a16292c3c0a173d928"),
            b"x".repeat(40),
            hex("a3626967ce00011170a166cb3ff8000000000000a362696ec40100"),
        ]
        .concat();
        assert_eq!(pack_body("salt/job/1/new", &data), expected);
    }

    #[test]
    fn unpack_splits_at_first_separator() {
        let mut body = b"weird\n\n".to_vec();
        // The data itself contains "\n\n".
        write_value(&mut body, &Value::from("a\n\nb"));
        let (tag, data) = unpack_body(&body).unwrap();
        assert_eq!(tag, "weird");
        assert_eq!(data, Value::from("a\n\nb"));
    }

    #[test]
    fn unpack_errors() {
        assert!(matches!(
            unpack_body(b"no-separator"),
            Err(EventError::NoTagEnd)
        ));
        assert!(matches!(
            unpack_body(b"tag\n\n"),
            Err(EventError::BadData(_))
        ));
        assert!(matches!(
            unpack_body(b"tag\n\n\x80\x80"),
            Err(EventError::BadData(_))
        ));
        assert!(matches!(
            unpack_body(b"\xff\n\n\x80"),
            Err(EventError::BadTag)
        ));
        assert!(matches!(
            unpack_body(b"tag\n\n\x82\xa1a"),
            Err(EventError::BadData(_))
        ));
        let deep = [b"t\n\n".to_vec(), vec![0x91; 100_000], vec![0xc0]].concat();
        assert!(matches!(unpack_body(&deep), Err(EventError::BadData(_))));
    }

    #[test]
    fn unpack_turns_invalid_utf8_strings_into_binary() {
        let body = [b"t\n\n".to_vec(), vec![0x81, 0xa1, b'k', 0xa2, 0xff, 0xfe]].concat();
        let (_, data) = unpack_body(&body).unwrap();
        assert_eq!(
            data,
            Value::Map(vec![(Value::from("k"), Value::Binary(vec![0xff, 0xfe]))])
        );
    }

    /// The first bytes observed on master_event_pub.ipc (samples/10_event_bus_raw_frame.json).
    #[test]
    fn pub_frame_matches_observed_prefix() {
        let body_len = 0x210;
        let body = vec![b'x'; body_len];
        let frame = pub_frame(&body);
        assert_eq!(&frame[..15], &hex("82a46865616480a4626f6479c50210")[..]);
        assert_eq!(frame.len(), 15 + body_len);
    }

    #[test]
    fn observed_sample_frame_decodes_as_far_as_it_goes() {
        let sample =
            std::fs::read_to_string("/work/shared/reference/samples/10_event_bus_raw_frame.json");
        // The sample is only the first 512 bytes of a 543-byte frame: incomplete.
        let Ok(text) = sample else { return };
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let bytes = hex(json["hex_first_512_bytes"].as_str().unwrap());
        let mut dec = PubDecoder::new(1 << 20);
        dec.push(&bytes);
        assert!(dec.next_body().unwrap().is_none());
    }

    #[test]
    fn pull_frame_has_length_prefix() {
        let body = pack_body("custom/rawtest", &Value::Map(vec![]));
        let frame = pull_frame(&body);
        let map = pub_frame(&body);
        assert_eq!(&frame[..4], &(map.len() as u32).to_be_bytes());
        assert_eq!(&frame[4..], &map[..]);
        // Small body: bin8 (0xc4).
        assert_eq!(&map[..13], &hex("82a46865616480a4626f6479c4")[..]);
    }

    fn bodies(n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let data = Value::Map(vec![
                    (Value::from("i"), Value::from(i as u64)),
                    (Value::from("pad"), Value::from("p".repeat(i * 37 % 300))),
                    (
                        Value::from("nested"),
                        Value::Array(vec![Value::Map(vec![(
                            Value::from("k"),
                            Value::Binary(vec![7; i % 5]),
                        )])]),
                    ),
                ]);
                pack_body(&format!("salt/job/{i}/ret/m1"), &data)
            })
            .collect()
    }

    #[test]
    fn pub_decoder_byte_by_byte() {
        let bodies = bodies(20);
        let stream: Vec<u8> = bodies.iter().flat_map(|b| pub_frame(b)).collect();
        let mut dec = PubDecoder::new(1 << 20);
        let mut got = Vec::new();
        for byte in stream {
            dec.push(&[byte]);
            while let Some(body) = dec.next_body().unwrap() {
                got.push(body);
            }
        }
        assert_eq!(got, bodies);
        assert!(dec.next_body().unwrap().is_none());
    }

    #[test]
    fn pull_decoder_in_odd_chunks_and_both_forms() {
        let bodies = bodies(20);
        let stream: Vec<u8> = bodies
            .iter()
            .enumerate()
            .flat_map(|(i, b)| {
                if i % 3 == 0 {
                    pub_frame(b)
                } else {
                    pull_frame(b)
                }
            })
            .collect();
        for chunk in [1, 2, 3, 7, 64, 1000, stream.len()] {
            let mut dec = PullDecoder::new(1 << 20);
            let mut got = Vec::new();
            for piece in stream.chunks(chunk) {
                dec.push(piece);
                while let Some(body) = dec.next_body().unwrap() {
                    got.push(body);
                }
            }
            assert_eq!(got, bodies, "chunk size {chunk}");
        }
    }

    #[test]
    fn decoders_enforce_max_frame() {
        let body = pack_body("big", &Value::from("z".repeat(2000)));
        let mut pull = PullDecoder::new(1000);
        pull.push(&pull_frame(&body)[..4]);
        assert!(matches!(pull.next_body(), Err(EventError::TooLarge { .. })));
        assert!(matches!(pull.next_body(), Err(EventError::Poisoned)));

        // Bare form: the declared bin32 length alone is enough to refuse.
        let mut pubd = PubDecoder::new(1000);
        pubd.push(&hex("82a46865616480a4626f6479c6ffffffff"));
        assert!(matches!(pubd.next_body(), Err(EventError::TooLarge { .. })));

        // A map declaring 2^32-1 entries cannot fit either.
        let mut pubd = PubDecoder::new(1000);
        pubd.push(&hex("dfffffffff"));
        assert!(matches!(pubd.next_body(), Err(EventError::TooLarge { .. })));

        // Exactly at the limit is fine.
        let frame = pub_frame(&body);
        let mut pubd = PubDecoder::new(frame.len());
        pubd.push(&frame);
        assert_eq!(pubd.next_body().unwrap(), Some(body.clone()));
        let mut pubd = PubDecoder::new(frame.len() - 1);
        pubd.push(&frame);
        assert!(matches!(pubd.next_body(), Err(EventError::TooLarge { .. })));
    }

    #[test]
    fn decoders_reject_garbage() {
        let mut pubd = PubDecoder::new(1 << 20);
        pubd.push(b"\x01\x02");
        assert!(matches!(pubd.next_body(), Err(EventError::Malformed(_))));

        let mut pubd = PubDecoder::new(1 << 20);
        pubd.push(&hex("81a468656164c1"));
        assert!(matches!(pubd.next_body(), Err(EventError::Malformed(_))));

        // A map without "body".
        let mut pubd = PubDecoder::new(1 << 20);
        pubd.push(&hex("81a468656164c0"));
        assert!(matches!(pubd.next_body(), Err(EventError::MissingBody)));

        // Length-prefixed payload that is not a map.
        let mut pull = PullDecoder::new(1 << 20);
        pull.push(&[0, 0, 0, 1, 0x05]);
        assert!(matches!(pull.next_body(), Err(EventError::Malformed(_))));

        // Length prefix covering two objects.
        let mut pull = PullDecoder::new(1 << 20);
        let map = pub_frame(b"t\n\n\x80");
        let mut frame = ((map.len() + 1) as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&map);
        frame.push(0xc0);
        pull.push(&frame);
        assert!(matches!(pull.next_body(), Err(EventError::Malformed(_))));
    }

    #[test]
    fn str_body_from_old_releases_is_accepted() {
        let mut frame = Vec::new();
        write_value(
            &mut frame,
            &Value::Map(vec![
                (Value::from("head"), Value::Map(vec![])),
                (Value::from("body"), Value::from("t\n\n\u{80}")),
            ]),
        );
        let mut pubd = PubDecoder::new(1 << 20);
        pubd.push(&frame);
        assert_eq!(
            pubd.next_body().unwrap(),
            Some("t\n\n\u{80}".as_bytes().to_vec())
        );
    }

    /// The body is found past keys and heads of any shape; a frame without one, or with one
    /// that is not bytes, is refused.
    #[test]
    fn the_body_is_found_past_any_other_entry() {
        let frame_of = |pairs: Vec<(Value, Value)>| {
            let mut frame = Vec::new();
            write_value(&mut frame, &Value::Map(pairs));
            frame
        };
        let body = Value::Binary(b"t\n\n\x81\xa1a\x01".to_vec());
        let frame = frame_of(vec![
            (
                Value::Array(vec![Value::from(1), Value::from(2)]),
                Value::Nil,
            ),
            (
                Value::Map(vec![(Value::from("k"), Value::from("v"))]),
                Value::from(3),
            ),
            (
                Value::from("head"),
                Value::Map(vec![(Value::from("x"), Value::Array(vec![Value::Nil]))]),
            ),
            (Value::from("body"), body.clone()),
        ]);
        assert_eq!(body_of(&frame).unwrap(), b"t\n\n\x81\xa1a\x01".to_vec());
        let no_body = frame_of(vec![(Value::from("head"), Value::Map(vec![]))]);
        assert!(matches!(body_of(&no_body), Err(EventError::MissingBody)));
        let not_bytes = frame_of(vec![(Value::from("body"), Value::from(1))]);
        assert!(matches!(body_of(&not_bytes), Err(EventError::MissingBody)));
        let mut trailing = frame.clone();
        trailing.push(0xc0);
        assert!(matches!(body_of(&trailing), Err(EventError::Malformed(_))));
        assert!(matches!(
            body_of(&[0x91, 0xc0]),
            Err(EventError::Malformed(_))
        ));
        assert!(matches!(
            body_of(&frame[..frame.len() - 1]),
            Err(EventError::Malformed(_))
        ));
    }

    #[test]
    fn scanner_handles_every_marker_family() {
        let values = vec![
            Value::Nil,
            Value::from(true),
            Value::from(5),
            Value::from(-5),
            Value::from(200),
            Value::from(-200),
            Value::from(70_000),
            Value::from(-70_000),
            Value::from(u64::MAX),
            Value::from(i64::MIN),
            Value::F32(1.5),
            Value::F64(2.5),
            Value::from("s"),
            Value::from("s".repeat(40)),
            Value::from("s".repeat(300)),
            Value::from("s".repeat(70_000)),
            Value::Binary(vec![1; 300]),
            Value::Binary(vec![1; 70_000]),
            Value::Array(vec![Value::Nil; 20]),
            Value::Array(vec![Value::Nil; 70_000]),
            Value::Map((0..20).map(|i| (Value::from(i), Value::Nil)).collect()),
            Value::Map((0..70_000).map(|i| (Value::from(i), Value::Nil)).collect()),
            Value::Ext(1, vec![1]),
            Value::Ext(1, vec![1; 2]),
            Value::Ext(1, vec![1; 4]),
            Value::Ext(1, vec![1; 8]),
            Value::Ext(1, vec![1; 16]),
            Value::Ext(1, vec![1; 3]),
            Value::Ext(1, vec![1; 300]),
            Value::Ext(1, vec![1; 70_000]),
        ];
        for v in values {
            let mut bytes = Vec::new();
            write_value(&mut bytes, &v);
            let mut scanner = Scanner::default();
            assert_eq!(
                scanner.scan(&bytes, usize::MAX).unwrap(),
                Some(bytes.len()),
                "{v:?}"
            );
            // Incremental: every strict prefix needs more bytes.
            let mut scanner = Scanner::default();
            for end in [0, 1, bytes.len() / 2, bytes.len() - 1] {
                if end >= bytes.len() {
                    continue;
                }
                assert_eq!(scanner.scan(&bytes[..end], usize::MAX).unwrap(), None);
            }
            assert_eq!(scanner.scan(&bytes, usize::MAX).unwrap(), Some(bytes.len()));
        }
    }

    #[test]
    fn tag_matching_modes() {
        let tag = "salt/job/20261122101715645321/ret/m1";
        assert!(tag_matches(
            "startswith",
            "salt/job/20261122101715645321",
            tag
        ));
        assert!(!tag_matches("startswith", "20261122101715645321", tag));
        assert!(tag_matches("endswith", "/ret/m1", tag));
        assert!(tag_matches("find", "/ret/", tag));
        assert!(!tag_matches("find", "/new", tag));
        assert!(tag_matches("regex", r"salt/job/\d+/ret/", tag));
        assert!(
            !tag_matches("regex", r"job/\d+", tag),
            "anchored at the start"
        );
        assert!(
            tag_matches("regex", "nomatch|salt", tag),
            "Salt just prepends '^'"
        );
        assert!(!tag_matches("regex", "(", tag));
        assert!(tag_matches("fnmatch", "salt/job/*/ret/*", tag));
        assert!(!tag_matches("fnmatch", "salt/job/*/new", tag));
        assert!(!tag_matches("nonsense", "salt", tag));
        // The bare-jid event does not match the job prefix.
        assert!(!tag_matches(
            "startswith",
            "salt/job/20261122101715645321",
            "20261122101715645321"
        ));
    }
}
