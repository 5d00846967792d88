#!/usr/bin/env bash
# Build nccl-tests, nvbandwidth and the CUDA samples' p2pBandwidthLatencyTest on a GPU node that has the compilers
# (nvcc, g++, CMake, Open MPI, NCCL) but reaches no package repository: the lent machine of run.sh. The commands
# are the benchmark_tools role's (roles/benchmark_tools/vars/main.yml, benchmark_tools_commands: nccl-tests with
# MPI=1 and CUDARTLIB=cudart_static, nvbandwidth and the CUDA 12.8+ samples with CMake, the samples' own
# architecture list narrowed as tasks/build.yml does); the role itself installs its compilers from NVIDIA's and the
# OS's repositories first, which that machine cannot.
# Usage: build_tools.sh ARCHIVES_DIR OUT_DIR [ARCH]
#   ARCHIVES_DIR holds nccl-tests-<v>.tar.gz, nvbandwidth-<v>.tar.gz and cuda-samples-<v>*.tar.gz (upstream tags);
#   OUT_DIR gets bin/ (all_reduce_perf, nvbandwidth, p2pBandwidthLatencyTest), build logs and ldd.txt.
#   ARCH: CUDA architecture (default 90, Hopper). Environment: NCCL_HOME (include/nccl.h, lib/libnccl.so; default
#   the nvidia-nccl-cu13 wheel of python3), BOOST_DIR (a Boost CMake package folder, when the node's Boost has no
#   program_options package), MPI_HOME (default the folder of mpicc's mpi.h).
set -euo pipefail
archives=$(realpath "${1:?usage: build_tools.sh ARCHIVES_DIR OUT_DIR [ARCH]}")
out=$(realpath -m "${2:?usage: build_tools.sh ARCHIVES_DIR OUT_DIR [ARCH]}")
arch=${3:-90}
mkdir -p "$out/bin"
work=$(mktemp -d)
nvcc=$(command -v nvcc)
cuda_home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
stubs=$cuda_home/targets/x86_64-linux/lib/stubs
[[ -d $stubs ]] || stubs=$cuda_home/lib64/stubs
if [[ -z ${NCCL_HOME:-} ]]; then
  # NCCL as NVIDIA's wheel ships it (lib/libnccl.so.2, include/nccl.h), laid out as the makefiles read NCCL_HOME.
  wheel=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')
  NCCL_HOME=$work/nccl
  mkdir -p "$NCCL_HOME/lib" "$NCCL_HOME/include"
  ln -s "$wheel"/include/* "$NCCL_HOME/include/"
  ln -s "$wheel/lib/libnccl.so.2" "$NCCL_HOME/lib/libnccl.so"
  ln -s "$wheel/lib/libnccl.so.2" "$NCCL_HOME/lib/libnccl.so.2"
fi
if [[ -z ${MPI_HOME:-} ]]; then
  for dir in $(mpicc --showme:incdirs); do [[ -f $dir/mpi.h ]] && MPI_HOME=$(dirname "$dir") && break; done
fi
boost=()
[[ -n ${BOOST_DIR:-} ]] && boost=(-DBoost_DIR="$BOOST_DIR" -DBoost_NO_SYSTEM_PATHS=ON)
export PATH=$cuda_home/bin:$PATH LIBRARY_PATH=$stubs

one() { ls "$archives"/$1 | sort -V | tail -n 1; }  # $1 is a glob
tar -xzf "$(one 'nccl-tests-*.tar.gz')" -C "$work"
tar -xzf "$(one 'nvbandwidth-*.tar.gz')" -C "$work"
tar -xzf "$(one 'cuda-samples-*.tar.gz')" -C "$work"
nccl_src=$(ls -d "$work"/nccl-tests-*)
nvbw_src=$(ls -d "$work"/nvbandwidth-*)
p2p_src=$(ls -d "$work"/cuda-samples-*)/Samples/5_Domain_Specific/p2pBandwidthLatencyTest

make -C "$nccl_src/src" -j"$(nproc)" MPI=1 MPI_HOME="$MPI_HOME" CUDA_HOME="$cuda_home" NCCL_HOME="$NCCL_HOME" \
  CUDARTLIB=cudart_static NVCC_GENCODE="-gencode=arch=compute_$arch,code=sm_$arch" BUILDDIR="$nccl_src/build" \
  "$nccl_src/build/all_reduce_perf" >"$out/build-nccl-tests.log" 2>&1
cmake -S "$nvbw_src" -B "$nvbw_src/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DMULTINODE=OFF "${boost[@]}" >"$out/build-nvbandwidth.log" 2>&1
cmake --build "$nvbw_src/build" -j "$(nproc)" >>"$out/build-nvbandwidth.log" 2>&1
sed -i -E "s/^set\(CMAKE_CUDA_ARCHITECTURES [^)]*\)/set(CMAKE_CUDA_ARCHITECTURES $arch)/" "$p2p_src/CMakeLists.txt"
cmake -S "$p2p_src" -B "$p2p_src/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCUDAToolkit_ROOT="$cuda_home" >"$out/build-p2p.log" 2>&1
cmake --build "$p2p_src/build" -j "$(nproc)" >>"$out/build-p2p.log" 2>&1
cp "$nccl_src/build/all_reduce_perf" "$nvbw_src/build/nvbandwidth" "$p2p_src/build/p2pBandwidthLatencyTest" "$out/bin/"
unset LIBRARY_PATH
for binary in "$out"/bin/*; do echo "### $(basename "$binary")"; LD_LIBRARY_PATH=$NCCL_HOME/lib ldd "$binary"; done \
  >"$out/ldd.txt"
# The folder of the libnccl.so.2 the binaries were linked against: run.sh puts it on LD_LIBRARY_PATH.
dirname "$(readlink -f "$NCCL_HOME/lib/libnccl.so.2")" >"$out/nccl-lib-dir.txt"
rm -rf "$work/"*-*/  # the source trees; the NCCL_HOME links stay for the runs
