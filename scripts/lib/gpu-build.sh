# Sourced by the GPU scripts (gpu-check.sh, gpu-profile.sh): finds CMake >= 3.25 and ninja on a
# machine like the lent H200 (they live in the Python environments' bin folders there) and
# configures build-gpu with CUDA on. Sets: cmake, ninja, nproc, build, configure_args.

for dir in "" /opt/torch/.venv/bin /opt/*/bin /opt/*/.venv/bin /usr/local/bin; do
  cand=${dir:+$dir/}cmake
  if command -v "$cand" >/dev/null 2>&1; then
    v=$("$cand" --version | head -1 | awk '{print $3}')
    if printf '3.25\n%s\n' "$v" | sort -V -C; then cmake=$cand; break; fi
  fi
done
ninja=$(command -v ninja || ls /opt/torch/.venv/bin/ninja /opt/*/bin/ninja 2>/dev/null | head -1)
nproc=$(nproc)
build=build-gpu

# Configure arguments for build-gpu: sm_90a machine code only unless CUDA_ARCH says otherwise.
configure_args=(-S . -B "$build" -G Ninja -DCMAKE_MAKE_PROGRAM="$ninja" -DCMAKE_BUILD_TYPE=Release
  -DQMOE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90a-real}"
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
