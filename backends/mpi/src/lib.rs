//! commbench backend: MPI through rsmpi.
