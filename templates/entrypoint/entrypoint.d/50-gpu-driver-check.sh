# Warn when no NVIDIA driver is visible: no libcuda.so.1 or no device node.
_have_lib=0
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then _have_lib=1; fi
for _d in ${LD_LIBRARY_PATH//:/ }; do
  case "$_d" in */compat*) continue ;; esac
  [ -e "$_d/libcuda.so.1" ] && _have_lib=1
done
if [ "$_have_lib" = 0 ] || { [ ! -e /dev/nvidiactl ] && [ ! -e /dev/dxg ] && [ ! -e /dev/nvgpu ]; }; then
  echo
  echo "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available."
  echo "   Use the NVIDIA Container Toolkit to start this container with GPU support; see"
  echo "   https://docs.nvidia.com/datacenter/cloud-native/ ."
  export NVIDIA_CPU_ONLY=1
fi
unset _have_lib _d
