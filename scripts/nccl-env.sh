# Sourced (not run): exports where NCCL is for Osprey's data-parallel training, and keeps NVLink
# multicast off. Osprey needs nccl.h to build (CMake looks in CUDA's include directory, .deps/include
# and $OSPREY_NCCL_INCLUDE) and loads libnccl.so.2 at run time (the loader's path, or
# $OSPREY_NCCL_LIBRARY). Where the system has no NCCL, PyTorch's wheel usually carries one
# (nvidia/nccl/{include,lib}); header and library are then taken from that same place, so their
# versions match.
#
#   source scripts/nccl-env.sh
osprey_find_nccl() {
  if ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2' &&
     [[ -f /usr/local/cuda/include/nccl.h || -f /usr/include/nccl.h ]]; then
    return 0
  fi
  local wheel
  wheel=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) || return 0
  if [[ -f $wheel/include/nccl.h ]]; then export OSPREY_NCCL_INCLUDE=${OSPREY_NCCL_INCLUDE:-$wheel/include}; fi
  if [[ -f $wheel/lib/libnccl.so.2 ]]; then export OSPREY_NCCL_LIBRARY=${OSPREY_NCCL_LIBRARY:-$wheel/lib/libnccl.so.2}; fi
  return 0
}
osprey_find_nccl
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}  # never NVLink multicast on shared machines
