# SPDX-License-Identifier: BSD-2-Clause
# A process with a million Python objects and 16 CUDA tensors: the census pause.
import os, time, torch
objs = [{"k": i} for i in range(1_000_000)]
keep = [torch.empty(1 << 20, device="cuda") for _ in range(16)]
torch.cuda.synchronize()
print(os.getpid(), flush=True)
open(os.environ["READY"], "w").write("1")
time.sleep(600)
