//! The column transpose of seed 003 ("Dense Linear Transpose"), timed with the method of
//! seed 000.
//!
//! Rank `source` holds an `N x N` matrix `A` of `f64`, stored **row-major** (`A[i][j]` at
//! `i * N + j`, as in the seed's C program), with `A[i][j] = i * N + j` so that every element
//! is distinct. Rank `dest` ends with `B = A^T`, also row-major: column `j` of `A` becomes row
//! `j` of `B`. As in seed 003 the matrix moves **one column per message**, `N` messages of `N`
//! doubles each, in column order.
//!
//! One *iteration* of the transpose is: `dest` posts its `N` receives (one per row of `B`),
//! `source` sends the `N` columns, `dest` waits for all of them and returns an 8-byte
//! acknowledgement, which `source` waits for. The acknowledgement closes the iteration so that
//! the time `source` measures covers the whole transfer; it is included in the time (one small
//! message, next to `N` column messages). A [`RawPoint`](crate::method::engine::RawPoint)
//! therefore has pattern
//! `transpose-pack` (or `transpose-vector` for MPI's derived datatype), `size = N * N * 8`
//! bytes, and `trips_per_iteration = 1`: the statistics are of the time of one whole transpose,
//! and rates are bytes of the matrix per second.
//!
//! Variants (each a [`Kernel`] of the one engine):
//! * `transpose-pack` ([`Transpose`] and [`PackKernel`], every backend): `source` packs each column into a
//!   contiguous buffer (explicit packing) and sends it with a blocking send; `dest` receives
//!   each column straight into its row buffer.
//! * `transpose-vector` (MPI backend only): `source` sends each column straight from the
//!   matrix with an `MPI_Type_vector(N, 1, N, MPI_DOUBLE)` derived datatype, as the seed does.
//!
//! Measurement ([`crate::method::engine::Measurement`]): as seed 000 §3.2 prescribes, every trial follows a barrier and
//! a handshake, and `source` times `npp` iterations; `npp` comes from §3.3 (the timer
//! resolution and the median iteration time) or is fixed. After the trials `dest` overwrites
//! its matrix, one more iteration runs, and `dest` checks that it now holds `A^T`; a failed
//! verification is an error of the run on every rank.

use crate::method::alloc::{try_with_capacity, try_zeroed};
use crate::method::benchmark::Benchmark;
use crate::method::engine::{Kernel, KernelSpec};
use crate::method::limits::PER_MESSAGE_OVERHEAD;
use crate::method::units::human_bytes;
use crate::method::MethodConfig;
use crate::transport::error::{Error, Result};
use crate::transport::{Completion, Endpoint, Rank, ReqId, Src, Tag, TagSel};

/// Tag of the column messages.
pub const TAG_COLUMN: Tag = 20;
/// Tag of the acknowledgement that closes one transpose.
pub const TAG_TRANSPOSE_ACK: Tag = 21;
/// Largest matrix accepted, bytes (each of `source` and `dest` holds one, plus a column).
pub const MAX_MATRIX_BYTES: u64 = 4 << 30;

/// Bytes of an `n x n` matrix of `f64`, or a configuration error for `n == 0`, a column
/// above 2^31 - 1 bytes, or a matrix above [`MAX_MATRIX_BYTES`].
pub fn matrix_bytes(n: usize) -> Result<u64> {
    if n == 0 {
        return Err(Error::Config("the matrix order must be at least 1".into()));
    }
    let col = (n as u64).checked_mul(8);
    let total = col.and_then(|c| c.checked_mul(n as u64));
    match (col, total) {
        (Some(c), Some(t)) if c <= i32::MAX as u64 && t <= MAX_MATRIX_BYTES => Ok(t),
        _ => Err(Error::Config(format!(
            "a {n} x {n} matrix of doubles is larger than {} GiB",
            MAX_MATRIX_BYTES >> 30
        ))),
    }
}

/// The value of `A[i][j]` on `source`: distinct for every element, so that a misplaced element
/// is detected.
#[inline]
pub fn source_value(n: usize, i: usize, j: usize) -> f64 {
    (i * n + j) as f64
}

/// `source`'s matrix `A`, row-major.
pub fn source_matrix(n: usize) -> Vec<f64> {
    (0..n * n).map(|k| source_value(n, k / n, k % n)).collect()
}

/// [`source_matrix`], allocated fallibly: an error names the matrix and its bytes.
fn try_source_matrix(n: usize) -> Result<Vec<f64>> {
    let count = (n as u64).saturating_mul(n as u64);
    let mut a = try_with_capacity(count, || format!("the {n} x {n} source matrix"))?;
    a.extend((0..n * n).map(|k| source_value(n, k / n, k % n)));
    Ok(a)
}

/// Check that `b(r, c)` (the element at row `r`, column `c` of `dest`'s matrix) equals
/// `A[c][r]` for every element; an error names the first element that differs.
pub fn verify_transposed(n: usize, b: impl Fn(usize, usize) -> f64) -> Result<()> {
    for r in 0..n {
        for c in 0..n {
            let got = b(r, c);
            let want = source_value(n, c, r);
            if got.to_bits() != want.to_bits() {
                return Err(Error::Protocol(format!(
                    "transpose verification failed: B[{r}][{c}] = {got}, expected A[{c}][{r}] = {want}"
                )));
            }
        }
    }
    Ok(())
}

/// The explicit-packing variant (`transpose-pack`): works on every backend.
#[derive(Debug)]
pub struct PackKernel {
    n: usize,
    me: Rank,
    source: Rank,
    dest: Rank,
    /// `source`: the matrix, row-major.
    a: Vec<f64>,
    /// `source`: the packed column being sent.
    pack: Vec<u8>,
    /// `dest`: one buffer per row of `B` (column `j` of `A` lands in `rows[j]`).
    rows: Vec<Vec<u8>>,
    ack: Vec<u8>,
    reqs: Vec<ReqId>,
    done: Vec<Completion>,
}

impl PackKernel {
    /// The kernel of rank `me` for an `n x n` matrix from `source` to `dest`.
    pub fn new(n: usize, me: Rank, source: Rank, dest: Rank) -> Result<Self> {
        let bytes = matrix_bytes(n)?;
        let is_src = me == source;
        let is_dst = me == dest;
        let col = n as u64 * 8;
        let what = || {
            format!(
                "a row of the {n} x {n} matrix ({} in all)",
                human_bytes(bytes)
            )
        };
        let rows = if is_dst {
            let mut rows = try_with_capacity(n as u64, || format!("the {n} rows of the matrix"))?;
            for _ in 0..n {
                rows.push(try_zeroed(col, what)?);
            }
            rows
        } else {
            Vec::new()
        };
        let slots = if is_dst { n as u64 } else { 0 };
        Ok(PackKernel {
            n,
            me,
            source,
            dest,
            a: if is_src {
                try_source_matrix(n)?
            } else {
                Vec::new()
            },
            pack: if is_src {
                try_zeroed(col, || format!("a column of the {n} x {n} matrix"))?
            } else {
                Vec::new()
            },
            rows,
            ack: vec![0u8; 8],
            reqs: try_with_capacity(slots, || format!("{n} receive requests"))?,
            done: try_with_capacity(slots, || format!("{n} completions"))?,
        })
    }
}

impl<E: Endpoint> Kernel<E> for PackKernel {
    fn name(&self) -> &'static str {
        "transpose-pack"
    }

    fn label(&self, _size: u64) -> String {
        let n = self.n;
        format!("transpose-pack {n} x {n}")
    }

    fn trips(&self, _size: u64) -> u64 {
        1
    }

    fn verifies(&self) -> bool {
        true
    }

    fn iteration(&mut self, ep: &mut E) -> Result<()> {
        let n = self.n;
        if self.me == self.source {
            for j in 0..n {
                let mut b = std::mem::take(&mut self.pack);
                for (i, dst) in b.chunks_exact_mut(8).enumerate() {
                    dst.copy_from_slice(&self.a[i * n + j].to_ne_bytes());
                }
                self.pack = ep.send(self.dest, TAG_COLUMN, b)?;
            }
            let ack = std::mem::take(&mut self.ack);
            self.ack = ep
                .recv(Src::Rank(self.dest), TagSel::Tag(TAG_TRANSPOSE_ACK), ack)?
                .buf;
        } else if self.me == self.dest {
            self.reqs.clear();
            for row in self.rows.iter_mut() {
                let b = std::mem::take(row);
                self.reqs
                    .push(ep.irecv(Src::Rank(self.source), TagSel::Tag(TAG_COLUMN), b)?);
            }
            self.done.clear();
            let waited = ep.wait_all(&self.reqs, &mut self.done);
            // Whatever completed goes back in place, also when a later wait failed.
            for (row, c) in self.rows.iter_mut().zip(self.done.drain(..)) {
                if c.len != n * 8 {
                    return Err(Error::Protocol(format!(
                        "a column of {} bytes, expected {}",
                        c.len,
                        n * 8
                    )));
                }
                *row = c.buf;
            }
            waited?;
            let ack = std::mem::take(&mut self.ack);
            self.ack = ep.send(self.source, TAG_TRANSPOSE_ACK, ack)?;
        }
        Ok(())
    }

    fn scramble(&mut self) {
        for row in &mut self.rows {
            row.fill(0xFF);
        }
    }

    fn check(&self) -> Result<()> {
        if self.me != self.dest {
            return Ok(());
        }
        if self.rows.len() != self.n || self.rows.iter().any(|r| r.len() != self.n * 8) {
            return Err(Error::Protocol(
                "transpose verification failed: rows missing".into(),
            ));
        }
        verify_transposed(self.n, |r, c| {
            let b = &self.rows[r][c * 8..c * 8 + 8];
            f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
        })
    }
}

/// Seed 003's column transpose of an `n x n` matrix of doubles, packed: a [`KernelSpec`]
/// every backend runs. The configured sizes do not apply: the message is the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transpose {
    /// Matrix order `N`.
    pub n: usize,
}

impl Transpose {
    /// Bytes one measuring rank holds: the matrix (as `A` on `source`, as the rows of `B` on
    /// `dest`), a packed column, and the bookkeeping of `N` messages (None: beyond 64 bits).
    pub fn buffer_bytes(&self) -> Option<u64> {
        let n = self.n as u64;
        let matrix = n.checked_mul(n)?.checked_mul(8)?;
        let col = n.checked_mul(8)?;
        matrix
            .checked_add(col)?
            .checked_add(n.checked_mul(PER_MESSAGE_OVERHEAD)?)
    }
}

/// A transpose measures its one matrix, sent as columns.
impl Benchmark for Transpose {
    fn command(&self) -> &'static str {
        "transpose"
    }

    fn trips(&self, _size: u64) -> u64 {
        1
    }

    fn buffer_bytes(&self, _cfg: &MethodConfig, _size: u64) -> Option<u64> {
        Transpose::buffer_bytes(self)
    }

    /// A packed column of `N` doubles: the largest message a transpose sends.
    fn message_sizes(&self, _cfg: &MethodConfig) -> Vec<u64> {
        vec![(self.n as u64).saturating_mul(8)]
    }
}

impl KernelSpec for Transpose {
    type Kernel<E: Endpoint> = PackKernel;

    fn kernel<E: Endpoint>(&self, me: Rank, cfg: &MethodConfig) -> Result<PackKernel> {
        PackKernel::new(self.n, me, cfg.source, cfg.dest)
    }

    fn sizes(&self, _cfg: &MethodConfig) -> Vec<u64> {
        matrix_bytes(self.n).map(|b| vec![b]).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_sizes_are_checked() {
        assert_eq!(matrix_bytes(3).unwrap(), 72);
        assert!(matches!(matrix_bytes(0), Err(Error::Config(_))));
        assert!(matches!(matrix_bytes(1 << 20), Err(Error::Config(_))));
        assert!(matches!(matrix_bytes(usize::MAX), Err(Error::Config(_))));
    }

    #[test]
    fn verification_accepts_the_transpose_only() {
        let n = 5;
        let a = source_matrix(n);
        assert_eq!(a[2 * n + 3], source_value(n, 2, 3));
        assert!(verify_transposed(n, |r, c| a[c * n + r]).is_ok());
        let e = verify_transposed(n, |r, c| a[r * n + c]).unwrap_err();
        assert!(e.to_string().contains("B[0][1]"), "{e}");
    }

    #[test]
    fn pack_kernel_scramble_breaks_verification() {
        let mut k = PackKernel::new(4, 1, 0, 1).unwrap();
        let a = source_matrix(4);
        for (j, row) in k.rows.iter_mut().enumerate() {
            for i in 0..4 {
                row[i * 8..i * 8 + 8].copy_from_slice(&a[i * 4 + j].to_ne_bytes());
            }
        }
        assert!(<PackKernel as Kernel<Dummy>>::check(&k).is_ok());
        <PackKernel as Kernel<Dummy>>::scramble(&mut k);
        assert!(<PackKernel as Kernel<Dummy>>::check(&k).is_err());
    }

    /// An endpoint type only for naming the kernel's trait instance in tests; never called.
    struct Dummy;
    impl Endpoint for Dummy {
        fn rank(&self) -> Rank {
            0
        }
        fn size(&self) -> u32 {
            1
        }
        fn backend(&self) -> &'static str {
            "dummy"
        }
        fn timeout(&self) -> std::time::Duration {
            std::time::Duration::ZERO
        }
        fn isend(&mut self, _: Rank, _: Tag, _: Vec<u8>) -> Result<ReqId> {
            Err(Error::Invalid("dummy".into()))
        }
        fn irecv(&mut self, _: Src, _: TagSel, _: Vec<u8>) -> Result<ReqId> {
            Err(Error::Invalid("dummy".into()))
        }
        fn test(&mut self, _: ReqId) -> Result<Option<Completion>> {
            Err(Error::Invalid("dummy".into()))
        }
    }
}
