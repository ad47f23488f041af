"""GenCeption's encoder does not serialise the run's other threaded work (issue 51, item 7): samples waiting for
the encoder's one-at-a-time forward pass wait as queued futures, not as threads of the loop's shared pool."""
import asyncio
import concurrent.futures
import threading
import time

import numpy as np
import pytest
from PIL import Image


@pytest.mark.slow
def test_waiting_encodes_leave_the_shared_thread_pool_free():
    torch = pytest.importorskip("torch")
    from vlmcheck.models.encoders import TorchEncoder

    running, overlap = [0], [0]
    guard = threading.Lock()

    class Slow(torch.nn.Module):
        def forward(self, x):
            with guard:
                running[0] += 1
                overlap[0] = max(overlap[0], running[0])
            time.sleep(0.1)  # a forward pass
            with guard:
                running[0] -= 1
            return x.mean(dim=(2, 3))

    def preprocess(images):
        return torch.stack([torch.from_numpy(np.asarray(im, dtype=np.float32)).permute(2, 0, 1) for im in images])

    enc = TorchEncoder(Slow(), preprocess, model_id="slow")
    image = Image.new("RGB", (4, 4), (10, 20, 30))

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=2))  # a busy run's pool
        encodes = [asyncio.create_task(enc.encode([image])) for _ in range(8)]
        await asyncio.sleep(0.05)  # the encodes are under way: one forward at a time, seven waiting
        t0 = time.perf_counter()
        await asyncio.to_thread(lambda: None)  # the run's other work (reading, decoding a file)
        waited = time.perf_counter() - t0
        out = await asyncio.gather(*encodes)
        return waited, out

    waited, out = asyncio.run(main())
    # with a lock held inside the shared pool, the pool's two threads sit in or wait for the forward pass and the
    # other work waits for ~7 of them (0.7 s); now it runs at once (generous bound for a loaded machine)
    assert waited < 0.3, waited
    assert overlap[0] == 1  # still one forward pass at a time
    assert all(np.allclose(o, [[10, 20, 30]]) for o in out)
