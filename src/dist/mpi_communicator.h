// mpi_communicator.h: the Communicator over OpenMPI (only built when CMake finds MPI; the one
// file that includes mpi.h is mpi_communicator.cpp).
#pragma once
#include <memory>

#include "mixprec/dist/distributed.h"

namespace mixprec::dist {

// Initializes MPI (MPI_THREAD_FUNNELED: only the training thread calls MPI) and returns the
// communicator over MPI_COMM_WORLD.
StatusOr<std::unique_ptr<Communicator>> make_mpi_communicator();
void finalize_mpi();

}  // namespace mixprec::dist
