"""An External Memory Management plugin (Numba's EMM interface): a counting allocator that
sees every device allocation and free of a program and delegates the memory itself to the
driver (devarray.backend_memalloc)."""
import gc
import weakref

import numpy as np

import devarray as cuda


class CountingMemoryManager(cuda.HostOnlyCUDAMemoryManager):
    """Counts allocations, frees and bytes in use."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.allocations_made = 0
        self.frees_seen = 0
        self.bytes_in_use = 0

    def initialize(self):
        pass

    def memalloc(self, size):
        mem = cuda.backend_memalloc(self.context, size)
        self.allocations_made += 1
        self.bytes_in_use += size

        def counted_free():  # runs when the library frees the block (the pointer goes)
            self.frees_seen += 1
            self.bytes_in_use -= size

        weakref.finalize(mem, counted_free)
        return mem

    def get_memory_info(self):
        total = self.context.device.total_memory
        return cuda.MemoryInfo(free=total - self.bytes_in_use, total=total)

    def get_ipc_handle(self, memory):
        raise NotImplementedError("no IPC in this example")

    @property
    def interface_version(self):
        return 1


def main():
    gc.collect()
    cuda.close()                                   # plugins serve contexts made afterwards
    cuda.set_memory_manager(CountingMemoryManager)
    try:
        mm = cuda.current_context().memory_manager
        a = np.arange(1000, dtype=np.float64)
        d_a = cuda.to_device(a)                    # 1 allocation: 8000 bytes
        d_b = cuda.device_array(500, np.float32)   # 2: 2000 bytes
        d_b.copy_to_device(a[:500].astype(np.float32))
        assert mm.allocations_made == 2 and mm.bytes_in_use == 10000
        assert cuda.current_context().get_memory_info().free == mm.context.device.total_memory - 10000
        np.testing.assert_array_equal(d_a.copy_to_host(), a)
        np.testing.assert_array_equal(d_b.copy_to_host(), a[:500].astype(np.float32))
        del d_a                                    # the plugin sees the free at once
        gc.collect()
        assert mm.frees_seen == 1 and mm.bytes_in_use == 2000
        for _ in range(10):                        # temporaries come and go
            cuda.to_device(np.ones(16)).copy_to_host()
        gc.collect()
        assert mm.allocations_made == 12 and mm.frees_seen == 11
        del d_b
        gc.collect()
        assert mm.frees_seen == 12 and mm.bytes_in_use == 0
        print("allocations:", mm.allocations_made, "frees:", mm.frees_seen)
    finally:
        gc.collect()
        cuda.close()
        cuda.set_memory_manager(None)              # the library's own manager again


if __name__ == "__main__":
    main()
