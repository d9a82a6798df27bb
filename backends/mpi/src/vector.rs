//! The column transpose of seed 003 with an MPI derived datatype (`transpose-vector`).
//!
//! As in the seed, `source` describes one column of its row-major `N x N` matrix of doubles
//! with `MPI_Type_vector(N, 1, N, MPI_DOUBLE)` and sends the columns one at a time straight
//! from the matrix (no packing in the program: MPI walks the stride), and `dest` receives each
//! into a contiguous row of its matrix (`N` x `MPI_DOUBLE`). One iteration, its timing and its
//! verification are those of [`commbench_core::method::transpose`], so `transpose-vector` and
//! `transpose-pack` compare directly.

use crate::sys;
use crate::{Mpi, MpiConfig, MpiEndpoint};
use commbench_core::method::engine::{Kernel, Measurement};
use commbench_core::method::transpose::{
    matrix_bytes, source_matrix, verify_transposed, Transpose, TAG_COLUMN, TAG_TRANSPOSE_ACK,
};
use commbench_core::{Endpoint, Error, Rank, Result, Src, TagSel};
use mpi::ffi;
use std::os::raw::{c_int, c_void};

/// The derived-datatype kernel of one rank.
#[derive(Debug)]
pub struct VectorKernel {
    n: usize,
    me: Rank,
    source: Rank,
    dest: Rank,
    /// `source`: `A`, row-major. `dest`: `B`, row-major.
    m: Vec<f64>,
    column: ffi::MPI_Datatype,
    reqs: Vec<ffi::MPI_Request>,
    ack: Vec<u8>,
}

impl VectorKernel {
    /// The kernel of rank `me` for an `n x n` matrix from `source` to `dest`; `source`
    /// creates and commits the column datatype.
    pub fn new(n: usize, me: Rank, source: Rank, dest: Rank) -> Result<Self> {
        matrix_bytes(n)?;
        let cn = sys::count(n, "a column")?;
        // SAFETY: reading a constant that mpi-sys initialises from the MPI header.
        let mut column = unsafe { ffi::RSMPI_DATATYPE_NULL };
        if me == source {
            // SAFETY: valid predefined type and out-pointer.
            let rc = unsafe { ffi::MPI_Type_vector(cn, 1, cn, sys::double_type(), &mut column) };
            sys::check(rc, "MPI_Type_vector")?;
            // SAFETY: `column` was just created.
            let rc = unsafe { ffi::MPI_Type_commit(&mut column) };
            sys::check(rc, "MPI_Type_commit")?;
        }
        Ok(VectorKernel {
            n,
            me,
            source,
            dest,
            m: if me == source {
                source_matrix(n)
            } else if me == dest {
                vec![0.0; n * n]
            } else {
                Vec::new()
            },
            column,
            reqs: vec![sys::request_null(); if me == dest { n } else { 0 }],
            ack: vec![0u8; 8],
        })
    }

    /// On a timeout MPI may still use the matrix: keep its memory valid for good.
    fn leak_matrix(&mut self) {
        sys::leak(std::mem::take(&mut self.m));
    }
}

impl Drop for VectorKernel {
    fn drop(&mut self) {
        // SAFETY: reading a constant that mpi-sys initialises from the MPI header.
        let null = unsafe { ffi::RSMPI_DATATYPE_NULL };
        if self.column != null {
            // SAFETY: the type was created by this kernel and is freed once; MPI keeps it
            // alive for operations still using it.
            unsafe {
                ffi::MPI_Type_free(&mut self.column);
            }
        }
    }
}

impl Kernel<MpiEndpoint> for VectorKernel {
    fn name(&self) -> &'static str {
        "transpose-vector"
    }

    fn label(&self, _size: u64) -> String {
        let n = self.n;
        format!("transpose-vector {n} x {n}")
    }

    fn trips(&self, _size: u64) -> u64 {
        1
    }

    fn verifies(&self) -> bool {
        true
    }

    fn iteration(&mut self, ep: &mut MpiEndpoint) -> Result<()> {
        let n = self.n;
        let comm = ep.data_comm();
        let cn = n as c_int;
        if self.me == self.source {
            for j in 0..n {
                let mut req = sys::request_null();
                // SAFETY: column `j` starts at element `j` of the n x n matrix and the vector
                // type reaches element j + (n-1) n, inside it; the matrix outlives the request
                // (it is leaked if the wait times out).
                let rc = unsafe {
                    ffi::MPI_Isend(
                        self.m.as_ptr().add(j) as *const c_void,
                        1,
                        self.column,
                        self.dest as c_int,
                        TAG_COLUMN as c_int,
                        comm,
                        &mut req,
                    )
                };
                sys::check(rc, "MPI_Isend (column type)")?;
                let mut st = sys::empty_status();
                if let Err(e) = ep.spin_raw(&mut req, &mut st, "sending a column", self.dest) {
                    if matches!(e, Error::Timeout { .. }) {
                        self.leak_matrix();
                    }
                    return Err(e);
                }
            }
            let ack = std::mem::take(&mut self.ack);
            self.ack = ep
                .recv(Src::Rank(self.dest), TagSel::Tag(TAG_TRANSPOSE_ACK), ack)?
                .buf;
        } else if self.me == self.dest {
            for (j, req) in self.reqs.iter_mut().enumerate() {
                // SAFETY: row `j` is `n` doubles inside the matrix, which outlives the request
                // (it is leaked if a wait times out).
                let rc = unsafe {
                    ffi::MPI_Irecv(
                        self.m.as_mut_ptr().add(j * n) as *mut c_void,
                        cn,
                        sys::double_type(),
                        self.source as c_int,
                        TAG_COLUMN as c_int,
                        comm,
                        req,
                    )
                };
                sys::check(rc, "MPI_Irecv (row)")?;
            }
            for j in 0..n {
                let mut st = sys::empty_status();
                let r = ep.spin_raw(
                    &mut self.reqs[j],
                    &mut st,
                    "receiving a column",
                    self.source,
                );
                if let Err(e) = r {
                    if matches!(e, Error::Timeout { .. }) {
                        self.leak_matrix();
                    }
                    return Err(e);
                }
                let mut got: c_int = 0;
                // SAFETY: `st` was filled by MPI_Test for a receive of doubles.
                let rc = unsafe { ffi::MPI_Get_count(&st, sys::double_type(), &mut got) };
                sys::check(rc, "MPI_Get_count")?;
                if got != cn {
                    return Err(Error::Protocol(format!(
                        "a column of {got} doubles, expected {n}"
                    )));
                }
            }
            let ack = std::mem::take(&mut self.ack);
            self.ack = ep.send(self.source, TAG_TRANSPOSE_ACK, ack)?;
        }
        Ok(())
    }

    fn scramble(&mut self) {
        if self.me == self.dest {
            self.m.fill(f64::NAN);
        }
    }

    fn check(&self) -> Result<()> {
        if self.me != self.dest {
            return Ok(());
        }
        if self.m.len() != self.n * self.n {
            return Err(Error::Protocol(
                "transpose verification failed: matrix missing".into(),
            ));
        }
        verify_transposed(self.n, |r, c| self.m[r * self.n + c])
    }
}

/// Measure the `transpose-vector` variant of `m` (a packed transpose's measurement, whose
/// configuration and collected points it shares) on every rank of the world (collective);
/// rank 0 collects the results in `m`.
pub fn measure_vector(mpi: &Mpi, cfg: &MpiConfig, m: &Measurement<'_, Transpose>) -> Result<()> {
    let mut ep = mpi.endpoint(cfg)?;
    let mut k = VectorKernel::new(m.spec.n, ep.rank(), m.cfg.source, m.cfg.dest)?;
    m.run_kernel(&mut ep, &mut k)
}
