//! A detection key in the kernel's layout: decoded from the transport encoding straight into
//! its blocks (what a worker loads), written to and read from a worker's local file, and the
//! layout itself ([`to_blocks`], [`scatter`]), shared with a prepared batch.

use omr_core::codec::Reader;
use omr_core::OmrError;

use crate::codec::{open, Kind};
use crate::params::LightParams;

/// Lanes of one block of the expanded key and of a prepared batch: the kernel keeps 2·ℓ·W
/// 128-bit sums in L1 while it streams a block.
pub(crate) const LANES: usize = 32;

/// A detection key laid out for the kernel: block b of W lanes holds, for every j, the W residues
/// of polynomial j at NTT positions b·W..(b+1)·W, so one block is one contiguous stream.
pub struct ExpandedKey {
    pub(crate) params: &'static LightParams,
    pub(crate) blocks: Vec<u64>,
    /// Unique in the process, never reused (the words never change): a device's name for it.
    id: u64,
}

impl std::fmt::Debug for ExpandedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpandedKey")
            .field("params", &self.params.name)
            .finish_non_exhaustive()
    }
}

impl ExpandedKey {
    /// `blocks` (in the kernel's layout) as a key with a number of its own.
    pub(crate) fn new(params: &'static LightParams, blocks: Vec<u64>) -> ExpandedKey {
        ExpandedKey {
            params,
            blocks,
            id: crate::fresh_id(),
        }
    }

    pub fn params(&self) -> &'static LightParams {
        self.params
    }

    /// The kernel's layout (blocks of [`LANES`](Self::LANES) positions, each every j's lanes),
    /// for a device pass (omr-light-cuda) that must read what the CPU kernel reads.
    pub fn blocks(&self) -> &[u64] {
        &self.blocks
    }

    /// Lanes of one block of [`blocks`](Self::blocks).
    pub const LANES: usize = LANES;

    /// This key's number, unique in the process: a device keeps it resident under it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bytes of memory it holds.
    pub fn memory_bytes(&self) -> usize {
        self.blocks.len() * 8
    }

    /// Decode straight into the kernel's layout (what a worker loads): each residue is checked
    /// below Q and written to its block as it is unpacked, into the one array the key keeps
    /// (a worker catching up loads keys by the hundred; decoding into rows first and laying
    /// them out after would take a second 32 MiB array per key).
    pub fn from_bytes(bytes: &[u8]) -> Result<ExpandedKey, OmrError> {
        let limit = crate::params::OMR_LIGHT_V1.detection_key_bytes();
        let (mut r, p) = open(bytes, Kind::DetectionKey, limit)?;
        let (rows, width) = (p.n, p.batch);
        let values = r.packed_iter(rows * width, p.q_bits())?;
        let mut blocks = vec![0u64; rows * width];
        for (i, v) in values.enumerate() {
            if v >= p.q {
                return Err(not_below_modulus(&r, i));
            }
            // Row m, column c: lane c % LANES of row m in block c / LANES.
            let (m, c) = (i / width, i % width);
            blocks[(c / LANES) * rows * LANES + m * LANES + c % LANES] = v;
        }
        r.finish()?;
        Ok(ExpandedKey::new(p, blocks))
    }

    /// Write the key as a worker's local file: the set's id, then the kernel's layout as
    /// little-endian words, so that loading it is one read (no unpacking, no re-layout). For a
    /// server's own disk only: [`DetectionKey::to_bytes`] is the transport encoding.
    pub fn write_local(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        w.write_all(&[LOCAL_MAGIC, self.params.id])?;
        let mut buf = Vec::with_capacity(1 << 16);
        for chunk in self.blocks.chunks(1 << 13) {
            buf.clear();
            buf.extend(chunk.iter().flat_map(|v| v.to_le_bytes()));
            w.write_all(&buf)?;
        }
        Ok(())
    }

    /// Read a file [`write_local`](Self::write_local) wrote for `params`; every word is checked
    /// to be a residue below Q (a torn or foreign file is refused, not detected with).
    pub fn read_local(
        params: &'static LightParams,
        r: &mut dyn std::io::Read,
    ) -> Result<ExpandedKey, OmrError> {
        let bad = |m: String| OmrError::malformed("local detection key file", m);
        let mut head = [0u8; 2];
        r.read_exact(&mut head).map_err(|e| bad(e.to_string()))?;
        if head != [LOCAL_MAGIC, params.id] {
            return Err(bad(format!("header {head:?} is not {}'s", params.name)));
        }
        // Read in pieces into the one array the key keeps (not the whole file into a second).
        let mut blocks = vec![0u64; params.n * params.batch];
        let mut buf = vec![0u8; 1 << 16];
        for piece in blocks.chunks_mut(buf.len() / 8) {
            let bytes = &mut buf[..piece.len() * 8];
            r.read_exact(bytes).map_err(|e| bad(e.to_string()))?;
            for (w, c) in piece.iter_mut().zip(bytes.chunks_exact(8)) {
                *w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            }
        }
        let mut extra = [0u8; 1];
        if r.read(&mut extra).map_err(|e| bad(e.to_string()))? != 0 {
            return Err(bad("bytes after the key".into()));
        }
        if let Some(i) = blocks.iter().position(|&v| v >= params.q) {
            return Err(bad(format!("word {i} is not below the modulus")));
        }
        Ok(ExpandedKey::new(params, blocks))
    }
}

/// The refusal of residue `i` of what `r` reads: it is not below Q (a stored key's decoders
/// all say it so).
pub(crate) fn not_below_modulus(r: &Reader<'_>, i: usize) -> OmrError {
    r.err(format!("residue {i} is not below the modulus"))
}

/// The first byte of a worker's local key file.
const LOCAL_MAGIC: u8 = 0xb7;

/// Rows of `width` residues (row-major, `rows` of them) into blocks of [`LANES`] columns.
pub(crate) fn to_blocks(rows_data: &[u64], rows: usize, width: usize) -> Vec<u64> {
    let mut out = vec![0u64; rows * width];
    for (m, row) in rows_data.chunks_exact(width).enumerate() {
        scatter(&mut out, rows, m, row);
    }
    out
}

/// Row `m` (natural layout, D residues) into the blocks of a `rows`-row blocked array.
pub(crate) fn scatter(blocked: &mut [u64], rows: usize, m: usize, row: &[u64]) {
    for (block, src) in blocked
        .chunks_exact_mut(rows * LANES)
        .zip(row.chunks_exact(LANES))
    {
        block[m * LANES..][..LANES].copy_from_slice(src);
    }
}
