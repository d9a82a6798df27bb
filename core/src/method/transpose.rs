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
//! message, next to `N` column messages). A [`RawPoint`](crate::method::engine::RawPoint) therefore has pattern
//! `transpose-pack` (or `transpose-vector` for MPI's derived datatype), `size = N * N * 8`
//! bytes, and `trips_per_iteration = 1`: the statistics are of the time of one whole transpose,
//! and rates are bytes of the matrix per second.
//!
//! Variants ([`TransposeKernel`]):
//! * `transpose-pack` ([`Transpose`], every backend): `source` packs each column into a
//!   contiguous buffer (explicit packing) and sends it with a blocking send; `dest` receives
//!   each column straight into its row buffer.
//! * `transpose-vector` (MPI backend only): `source` sends each column straight from the
//!   matrix with an `MPI_Type_vector(N, 1, N, MPI_DOUBLE)` derived datatype, as the seed does.
//!
//! Measurement ([`measure`]): as seed 000 §3.2 prescribes, every trial follows a barrier and
//! a handshake, and `source` times `npp` iterations; `npp` comes from §3.3 (the timer
//! resolution and the median iteration time) or is fixed. After the trials `dest` overwrites
//! its matrix, one more iteration runs, and `dest` checks that it now holds `A^T`; a failed
//! verification is an error of the run on every rank.

use crate::method::engine::{self, Collected, Progress, ProgressFn, SizeRun, Stage};
use crate::method::MethodConfig;
use crate::transport::error::{Error, Result, ResultExt};
use crate::transport::{Completion, Endpoint, Program, Rank, ReqId, Src, Tag, TagSel};
use std::sync::Mutex;

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
        return Err(Error::Config("--n must be at least 1".into()));
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

/// One transpose variant on one rank: what [`measure`] times.
pub trait TransposeKernel<E: Endpoint> {
    /// Pattern name in the result document (`transpose-pack`, `transpose-vector`).
    fn name(&self) -> &'static str;
    /// One transpose (see the module documentation); called on `source` and `dest` only.
    fn iteration(&mut self, ep: &mut E) -> Result<()>;
    /// On `dest`: overwrite the received matrix so that the verified iteration must refill it.
    fn scramble(&mut self);
    /// On `dest`: check that the matrix is `A^T`. Ok elsewhere.
    fn verify(&self) -> Result<()>;
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
        matrix_bytes(n)?;
        let is_src = me == source;
        let is_dst = me == dest;
        Ok(PackKernel {
            n,
            me,
            source,
            dest,
            a: if is_src { source_matrix(n) } else { Vec::new() },
            pack: if is_src { vec![0u8; n * 8] } else { Vec::new() },
            rows: if is_dst {
                (0..n).map(|_| vec![0u8; n * 8]).collect()
            } else {
                Vec::new()
            },
            ack: vec![0u8; 8],
            reqs: Vec::with_capacity(if is_dst { n } else { 0 }),
            done: Vec::with_capacity(if is_dst { n } else { 0 }),
        })
    }
}

impl<E: Endpoint> TransposeKernel<E> for PackKernel {
    fn name(&self) -> &'static str {
        "transpose-pack"
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

    fn verify(&self) -> Result<()> {
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

/// The column transpose with explicit packing, as a [`Program`] every backend runs.
/// `cfg.sizes` is ignored: the message is the matrix of `n x n` doubles.
pub struct Transpose<'a> {
    /// Matrix order `N`.
    pub n: usize,
    /// The method's parameters (`source` sends, `dest` receives).
    pub cfg: MethodConfig,
    /// Progress callback (rank 0).
    pub progress: Option<&'a ProgressFn<'a>>,
    /// Results, on rank 0.
    pub collected: Mutex<Collected>,
}

impl std::fmt::Debug for Transpose<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transpose")
            .field("n", &self.n)
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl<'a> Transpose<'a> {
    /// A transpose of an `n x n` matrix with this configuration.
    pub fn new(n: usize, cfg: MethodConfig, progress: Option<&'a ProgressFn<'a>>) -> Self {
        Transpose {
            n,
            cfg,
            progress,
            collected: Mutex::new(Collected::default()),
        }
    }

    /// Take what rank 0 collected (also after a failed run).
    pub fn take_collected(&self) -> Collected {
        engine::take_collected(&self.collected)
    }
}

impl Program for Transpose<'_> {
    type Output = ();

    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let mut k = PackKernel::new(self.n, ep.rank(), self.cfg.source, self.cfg.dest)?;
        measure(
            ep,
            self.n,
            &self.cfg,
            self.progress,
            &self.collected,
            &mut k,
        )
    }
}

/// Measure `kernel` with the method of seed 000 (timer §3.1, npp §3.3, trials §3.2), verify
/// the result once, and leave the raw trial times in `collected` on rank 0. Every rank of the
/// run calls it; ranks other than `cfg.source` and `cfg.dest` only join the control plane.
pub fn measure<E: Endpoint, K: TransposeKernel<E>>(
    ep: &mut E,
    n: usize,
    cfg: &MethodConfig,
    progress: Option<&ProgressFn<'_>>,
    collected: &Mutex<Collected>,
    kernel: &mut K,
) -> Result<()> {
    let bytes = matrix_bytes(n)?;
    let mcfg = MethodConfig {
        sizes: vec![bytes],
        ..cfg.clone()
    };
    mcfg.validate(ep.size())?;
    let me = ep.rank();
    let (src, dst) = (cfg.source, cfg.dest);
    let name = kernel.name();
    let report = |stage: Stage, done: u64, total: u64| {
        if let (0, Some(cb)) = (me, progress) {
            cb(Progress {
                size_index: 0,
                sizes: 1,
                size: bytes,
                stage,
                done,
                total,
            });
        }
    };
    // §3.1: the timer of the rank that times.
    report(Stage::Timer, 0, 1);
    let (min_ov, res_timing) = engine::characterise_timer(ep, &mcfg, collected)?;

    let phase = format!("{name} {n} x {n}");
    let participant = me == src || me == dst;
    let mut hs = vec![0u8; 8];
    ep.barrier().phase_with(|| format!("{phase}: barrier"))?;
    report(Stage::Warmup, 0, cfg.warmup);
    if participant {
        for _ in 0..cfg.warmup {
            kernel
                .iteration(ep)
                .phase_with(|| format!("{phase}: warm-up"))?;
        }
    }

    // §3.3 and §3.2: npp, then the timed trials, as for every pattern.
    let run = SizeRun {
        cfg: &mcfg,
        pattern: name,
        size: bytes,
        trips: 1,
        min_ov,
        res_timing,
        collected,
        progress: &report,
    };
    engine::measure_size(ep, &mut |ep: &mut E| kernel.iteration(ep), &mut hs, run)
        .phase_with(|| phase.clone())?;

    // Verification: dest forgets its matrix, one more transpose refills it, dest checks.
    ep.barrier()
        .phase_with(|| format!("{phase}: barrier before verification"))?;
    if me == dst {
        kernel.scramble();
    }
    if participant {
        kernel
            .iteration(ep)
            .phase_with(|| format!("{phase}: verified transpose"))?;
    }
    let mut verdict = Vec::new();
    if me == dst {
        if let Err(e) = kernel.verify() {
            verdict = e.to_string().into_bytes();
        }
    }
    ep.broadcast(dst, &mut verdict)
        .phase_with(|| format!("{phase}: sharing the verification"))?;
    if !verdict.is_empty() {
        return Err(Error::Protocol(format!(
            "rank {dst}: {}",
            String::from_utf8_lossy(&verdict)
        )));
    }
    ep.barrier().phase("final barrier")
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
        assert!(<PackKernel as TransposeKernel<Dummy>>::verify(&k).is_ok());
        <PackKernel as TransposeKernel<Dummy>>::scramble(&mut k);
        assert!(<PackKernel as TransposeKernel<Dummy>>::verify(&k).is_err());
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
