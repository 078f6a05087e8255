#!/usr/bin/env bash
# System packages for the parallel partitioner (`mpirun -np K graphstore partition --chunks ...`):
# Debian's Open MPI and PT-Scotch's ParMETIS-compatible library (libparmetis.so, the ParMETIS v3 API).
# Debian packages rather than PyPI: no PyPI package ships a ParMETIS-API library, and the library must
# link against the same MPI that mpi4py loads (mpi4py's wheel loads the system Open MPI at run time).
# `make install` runs this; it does nothing when everything is there, and only warns (the parallel tests
# then skip, saying why) where apt-get is missing or not permitted.
set -u
need=()
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin libopenmpi-dev)
ldconfig -p 2>/dev/null | grep -q 'libparmetis.so ' || need+=(libscotchparmetis-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "system-packages: no apt-get; install MPI and a ParMETIS-API library (${need[*]}) by hand" >&2
    exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
export DEBIAN_FRONTEND=noninteractive
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"; } >/tmp/graphstore-system-packages.log 2>&1; then
    echo "system-packages: could not install ${need[*]} (see /tmp/graphstore-system-packages.log); the parallel partitioner's tests will skip" >&2
fi
exit 0
