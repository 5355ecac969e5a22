# SPDX-License-Identifier: BSD-2-Clause
# A PyTorch 2.x job with CUDA tensors held in known places, and a staircase leak.
import os, sys, threading, time, torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(1024, 1024)
        self.history = []

    def forward(self, x):
        y = self.lin(x)
        self.history.append(y)          # retention line
        return y

dev = "cuda"
model = Model().to(dev)
results = []                            # a global list
cache = {"a": torch.empty(1 << 20, device=dev), 7: torch.empty(1 << 18, device=dev)}
base = torch.empty(4 << 20, dtype=torch.uint8, device=dev)
views = [base[:1024], base[1024:2048], base.view(torch.int32)]
total = 0
def step(i):
    global total
    x = torch.randn(256, 1024, device=dev)
    y = model(x)
    results.append(y.detach() * 2)      # outputs kept
    loss = y.sum()
    total = total + loss                # graph kept
def worker():
    local_t = torch.ones(3 << 18, device=dev)
    while True:
        time.sleep(1)
threading.Thread(target=worker, daemon=True).start()
print(os.getpid(), flush=True)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
for i in range(n):
    step(i)
    torch.cuda.synchronize()
    time.sleep(0.1)
print("allocated", torch.cuda.memory_allocated(), "reserved", torch.cuda.memory_reserved(),
      "history", len(model.history), "results", len(results), flush=True)
open(os.environ["READY"], "w").write("1")
time.sleep(600)
