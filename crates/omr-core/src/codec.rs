//! Versioned, size-limited binary encodings: a fixed header, bounds-checked readers, bit packing.
//!
//! Every encoding starts with `b"OMR"`, a kind byte, a version byte and the parameter set id.
//! Readers check every length against the remaining input before allocating, so junk input
//! yields [`OmrError::Malformed`] and never a panic or an unbounded allocation.

pub use crate::bits::{pack_bits, unpack_bits, Unpacked};
use crate::error::OmrError;
use crate::params::ParamSet;

pub const MAGIC: &[u8; 3] = b"OMR";
/// Length of the common header: magic (3), kind (1), version (1), parameter set (1).
pub const HEADER_LEN: usize = 6;
pub(crate) const VERSION: u8 = 1;

/// What an encoding holds (the kind byte of the header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Clue = 1,
    ClueKey = 2,
    DetectionKey = 3,
    SecretKey = 4,
    Digest = 5,
    Message = 6,
    Accumulator = 7,
    DigestKey = 8,
    ExpandedDetectionKey = 9,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Clue => "clue",
            Kind::ClueKey => "clue key",
            Kind::DetectionKey => "detection key",
            Kind::SecretKey => "secret key",
            Kind::Digest => "digest",
            Kind::Message => "message",
            Kind::Accumulator => "accumulator",
            Kind::DigestKey => "digest key",
            Kind::ExpandedDetectionKey => "expanded detection key",
        }
    }
}

pub(crate) fn write_header(out: &mut Vec<u8>, kind: Kind, params: &ParamSet) {
    write_header_version(out, kind, VERSION, params);
}

/// A header with another version than [`VERSION`] (an encoding that has several).
pub(crate) fn write_header_version(out: &mut Vec<u8>, kind: Kind, version: u8, params: &ParamSet) {
    out.extend_from_slice(MAGIC);
    out.push(kind as u8);
    out.push(version);
    out.push(params.id);
}

/// A bounds-checked reader over an encoding.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// Check the size limit and the common header of an encoding whose kind byte is `kind` and
    /// whose parameter-set id another crate resolves (omr-light's): the reader positioned after
    /// the header, the version and the set id. `what` names the encoding in errors.
    pub fn open_header(
        buf: &'a [u8],
        kind: u8,
        what: &'static str,
        limit: usize,
        versions: &[u8],
    ) -> Result<(Self, u8, u8), OmrError> {
        if buf.len() > limit {
            return Err(OmrError::TooLarge {
                what,
                got: buf.len(),
                limit,
            });
        }
        if buf.len() < HEADER_LEN {
            return Err(OmrError::malformed(what, "shorter than the header"));
        }
        if &buf[..3] != MAGIC {
            return Err(OmrError::malformed(what, "bad magic (not an OMR encoding)"));
        }
        if buf[3] != kind {
            return Err(OmrError::malformed(
                what,
                format!("holds kind {}, not a {what}", buf[3]),
            ));
        }
        let version = buf[4];
        if !versions.contains(&version) {
            return Err(OmrError::malformed(
                what,
                format!("unsupported version {version}"),
            ));
        }
        let reader = Reader {
            buf: &buf[HEADER_LEN..],
            what,
        };
        Ok((reader, version, buf[5]))
    }

    /// Check the size limit and the header; return the reader positioned after it and the set.
    pub(crate) fn open(
        buf: &'a [u8],
        kind: Kind,
        limit: usize,
    ) -> Result<(Self, &'static ParamSet), OmrError> {
        let (r, params, _) = Self::open_versions(buf, kind, limit, &[VERSION])?;
        Ok((r, params))
    }

    /// [`Reader::open`] for an encoding with several versions: any of `versions`, which is
    /// returned too.
    pub(crate) fn open_versions(
        buf: &'a [u8],
        kind: Kind,
        limit: usize,
        versions: &[u8],
    ) -> Result<(Self, &'static ParamSet, u8), OmrError> {
        let (reader, version, id) =
            Self::open_header(buf, kind as u8, kind.name(), limit, versions)?;
        Ok((reader, ParamSet::by_id(id)?, version))
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], OmrError> {
        if n > self.buf.len() {
            return Err(OmrError::malformed(
                self.what,
                format!("truncated: needs {n} more bytes, {} left", self.buf.len()),
            ));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub fn u8(&mut self) -> Result<u8, OmrError> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, OmrError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    pub fn u64(&mut self) -> Result<u64, OmrError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    pub(crate) fn u128(&mut self) -> Result<u128, OmrError> {
        Ok(u128::from_le_bytes(
            self.take(16)?.try_into().expect("16 bytes"),
        ))
    }

    pub fn array32(&mut self) -> Result<[u8; 32], OmrError> {
        Ok(self.take(32)?.try_into().expect("32 bytes"))
    }

    /// Read `count` values of `bits` bits each, packed LSB-first.
    pub fn packed(&mut self, count: usize, bits: u32) -> Result<Vec<u64>, OmrError> {
        Ok(self.packed_iter(count, bits)?.collect())
    }

    /// [`packed`](Self::packed), one value at a time.
    pub fn packed_iter(&mut self, count: usize, bits: u32) -> Result<Unpacked<'a>, OmrError> {
        let len = (count * bits as usize).div_ceil(8);
        let bytes = self.take(len)?;
        Ok(Unpacked::new(bytes, count, bits))
    }

    /// Read `count` little-endian u64 values.
    pub fn u64s(&mut self, count: usize) -> Result<Vec<u64>, OmrError> {
        let bytes = self.take(
            count
                .checked_mul(8)
                .ok_or_else(|| self.err("length overflow"))?,
        )?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
            .collect())
    }

    /// Read a k̄ and check it against the parameter set.
    pub(crate) fn kbar(&mut self, p: &ParamSet) -> Result<usize, OmrError> {
        let kbar = self.u32()? as usize;
        if kbar == 0 || kbar > p.max_kbar {
            return Err(self.err(format!("k̄ {kbar} out of range 1..={}", p.max_kbar)));
        }
        Ok(kbar)
    }

    /// Read a k̄ and a board range `[start, end)` no longer than the set's `max_range`.
    pub(crate) fn kbar_and_range(&mut self, p: &ParamSet) -> Result<(usize, u64, u64), OmrError> {
        let kbar = self.kbar(p)?;
        let start = self.u64()?;
        let end = self.u64()?;
        if end < start || end - start > p.max_range {
            return Err(self.err(format!("bad range [{start}, {end})")));
        }
        Ok((kbar, start, end))
    }

    pub fn err(&self, why: impl Into<String>) -> OmrError {
        OmrError::malformed(self.what, why)
    }

    /// Fail unless all input was consumed.
    pub fn finish(self) -> Result<(), OmrError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(OmrError::malformed(
                self.what,
                format!("{} trailing bytes", self.buf.len()),
            ))
        }
    }
}

/// Append a k̄ and a board range, as [`Reader::kbar_and_range`] reads them.
pub(crate) fn write_kbar_and_range(out: &mut Vec<u8>, kbar: usize, start: u64, end: u64) {
    out.extend_from_slice(&(kbar as u32).to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&end.to_le_bytes());
}
