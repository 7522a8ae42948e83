"""Devices this process can use."""
from tfref import _lib


def list_physical_devices(device_type: str = None) -> list:
    devices = ["/physical_device:CPU:0"]
    lib = _lib.load("cuda")
    count = 0
    if lib is not None:
        lib.tfref_cuda_device_count.restype = _lib.I
        count = lib.tfref_cuda_device_count()
    devices += [f"/physical_device:GPU:{i}" for i in range(count)]
    if device_type is None:
        return devices
    return [d for d in devices if d.split(":")[1] == device_type.upper()]
