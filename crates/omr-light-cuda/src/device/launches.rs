//! The two launches of a pass: the products of the resident keys over the batch on the card, then
//! the inverse NTTs and the switch of the batch's coefficients.

use cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};
use omr_light::{Batch, ExpandedKey};

use super::{CudaPass, Inverse, State, INVERSE_THREADS, THREADS};
use crate::raw::{launch, launch_inverse};
use crate::types::CudaError;

impl CudaPass {
    /// Launch the products of the resident `part` over the batch on the card, into
    /// `state.sums` (ℓ rows of D per key, in the order of `part`).
    pub(super) fn launch(
        &self,
        state: &mut State,
        part: &[&ExpandedKey],
        n: usize,
        d: usize,
    ) -> Result<(), CudaError> {
        let words = part.len() * 2 * d;
        if state.sums.as_ref().is_none_or(|s| s.len() < words) {
            state.sums = None;
            state.sums = Some(self.stream.alloc_zeros::<u64>(words)?);
        }
        let State {
            keys, batch, sums, ..
        } = state;
        let (_, plain) = batch.as_ref().expect("uploaded first");
        let sums = sums.as_mut().expect("allocated above");
        let mut pointers = Vec::with_capacity(part.len());
        let mut guards = Vec::with_capacity(part.len());
        for key in part {
            let resident = keys.get(&key.id()).expect("made resident first");
            let (ptr, guard) = resident.words.device_ptr(&self.stream);
            pointers.push(ptr);
            guards.push(guard);
        }
        let pointers = self.stream.clone_htod(&pointers)?;
        let config = LaunchConfig {
            grid_dim: (
                (d as u32).div_ceil(THREADS),
                part.len().div_ceil(self.keys_per_thread) as u32,
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let (n, d, count) = (n as u32, d as u32, part.len() as u32);
        let mut args = self.stream.launch_builder(&self.kernel);
        args.arg(plain)
            .arg(&pointers)
            .arg(sums)
            .arg(&n)
            .arg(&d)
            .arg(&count);
        launch(args, config)?;
        drop(guards);
        Ok(())
    }

    /// Launch the inverse NTTs of the `keys` keys' sums (2 rows each) and the switch of the
    /// batch's coefficients into `state.values` (the first `batch.len()` of each row); the
    /// values that holds.
    pub(super) fn launch_inverse(
        &self,
        state: &mut State,
        inverse: &Inverse,
        keys: usize,
        batch: &Batch,
    ) -> Result<usize, CudaError> {
        let d = batch.params().batch;
        let (rows, count) = (keys * 2, batch.len().max(1));
        let words = rows * count;
        if state.values.as_ref().is_none_or(|c| c.len() < words) {
            state.values = None;
            state.values = Some(self.stream.alloc_zeros::<u32>(words)?);
        }
        let State {
            sums,
            values,
            scaled_b,
            ..
        } = state;
        let sums = sums.as_ref().expect("launched first");
        let scaled_b = scaled_b.as_ref().expect("uploaded with the batch");
        let out = values.as_mut().expect("allocated above");
        let config = LaunchConfig {
            grid_dim: (rows as u32, 1, 1),
            block_dim: (INVERSE_THREADS, 1, 1),
            shared_mem_bytes: (d * 8) as u32,
        };
        let (_, scale, log_q0) = batch.switch_inputs();
        let (d32, count32) = (d as u32, count as u32);
        let mut args = self.stream.launch_builder(&inverse.kernel);
        args.arg(sums)
            .arg(&inverse.twiddles)
            .arg(out)
            .arg(&d32)
            .arg(&count32)
            .arg(&inverse.d_inv)
            .arg(scaled_b)
            .arg(&scale)
            .arg(&log_q0);
        launch_inverse(args, config)?;
        Ok(words)
    }
}
