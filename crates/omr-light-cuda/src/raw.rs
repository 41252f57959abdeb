//! The crate's unsafe calls, each with why it is sound: the two kernel launches, the copy of a
//! pass's words back into page-locked memory, allocating that memory, and probing for the
//! driver and NVRTC (loading a library that is absent would panic inside cudarc).

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchArgs, LaunchConfig,
    PinnedHostSlice, ValidAsZeroBits,
};

use crate::types::CudaError;

/// Launch `light_inverse` with its arguments pushed.
#[allow(unsafe_code)]
pub(crate) fn launch_inverse(
    mut args: LaunchArgs<'_>,
    config: LaunchConfig,
) -> Result<(), CudaError> {
    // SAFETY: the arguments match pass.cu's `light_inverse(const u64*, const u64*, unsigned*,
    // unsigned, unsigned, u64, const u64*, double, unsigned)` in order and type. Block r reads
    // row r of the sums (D words; the sums hold 2·D words for each of the keys, one block per
    // row), D twiddles (the table holds D), the first `count` words of row r % 2 of the
    // batch's Δ·b′ (2 rows of D), and writes `count` 32-bit values at r·count of the output,
    // allocated for every row; the dynamic shared memory is D words, all the kernel indexes.
    unsafe { args.launch(config) }?;
    Ok(())
}

/// Launch `light_pass` with its arguments pushed.
#[allow(unsafe_code)]
pub(crate) fn launch(mut args: LaunchArgs<'_>, config: LaunchConfig) -> Result<(), CudaError> {
    // SAFETY: the arguments match pass.cu's `light_pass(const u64*, const u64* const*, u64*,
    // unsigned, unsigned, unsigned)` in order and type. The kernel reads (n + 1)·D words of the
    // plaintexts (the buffer holds the batch's plaintexts, exactly that), n·D words behind each
    // key pointer (each a resident key's buffer of n·D words, held by the caller's state while
    // the stream runs: the caller synchronises before releasing the lock), and writes 2·D words
    // per key into the sums, allocated for at least that many keys. Threads past D or past the
    // key count return before touching memory.
    unsafe { args.launch(config) }?;
    Ok(())
}

/// Copy the first `dst.len()` values of `src` into `dst` and wait for it. (cudarc's
/// `memcpy_dtoh` copies as many values as the whole destination holds: into a page-locked
/// buffer larger than this pass's values it would read past the values the pass wrote, and past
/// `src`.)
#[allow(unsafe_code)]
pub(crate) fn copy_back<T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    src: &CudaSlice<T>,
    dst: &mut [T],
) -> Result<(), CudaError> {
    assert!(dst.len() <= src.len(), "copy within the device buffer");
    stream.context().bind_to_thread()?;
    let (ptr, guard) = src.device_ptr(stream);
    // SAFETY: `dst` is `dst.len()` values of host memory borrowed mutably until the copy is
    // done (the stream is synchronised below, before the borrow ends); the device range
    // [ptr, ptr + dst.len() values) lies within `src` (asserted above), which the caller holds.
    unsafe {
        cudarc::driver::result::memcpy_dtoh_async(dst, ptr, stream.cu_stream())?;
    }
    drop(guard);
    stream.synchronize()?;
    Ok(())
}

/// Integers, for which every bit pattern is a valid value.
pub(crate) trait Plain: DeviceRepr + ValidAsZeroBits {}
impl Plain for u32 {}
impl Plain for u64 {}

/// `len` values of page-locked host memory, cached (not write-combined, which cudarc's
/// `alloc_pinned` asks for: the host reads every value back, and reads of write-combined
/// memory bypass the caches).
#[allow(unsafe_code)]
pub(crate) fn pinned<T: Plain>(
    ctx: &Arc<CudaContext>,
    len: usize,
) -> Result<PinnedHostSlice<T>, CudaError> {
    // SAFETY: the memory is uninitialised; every use copies device values into it before
    // reading the same values back, and every bit pattern is a valid `Plain` (u32, u64).
    Ok(unsafe { ctx.alloc_pinned_with_flags::<T>(len, 0) }?)
}

/// Whether the CUDA driver library can be loaded (loading it when it is absent would panic).
#[allow(unsafe_code)]
pub(crate) fn driver_present() -> bool {
    // SAFETY: only tries to open the library by its candidate names; no symbol is called.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether NVRTC can be loaded.
#[allow(unsafe_code)]
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}
