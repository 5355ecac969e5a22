#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Late attach: a PyTorch job keeps one tensor a step at keep_output from its start; it
writes its figures at that moment to $FW_PRE after PRE steps, or after $FW_PRE_S seconds of
leaking when that is set (gpuleak attaches only then), goes on leaking once $FW_GO exists
($FW_POST_STEPS steps, 24 unless set), and ends as fw_common.py says. gpuleak must name the
leak at its line and report what was held before it attached as such (context and before
attach = NVML's figure minus what it saw)."""
import json
import os
import time

import fw_common
import torch

PRE, STEPS, INTERVAL, N = 30, 24, 0.15, 1 << 20  # 4 MiB of float32 a step


def keep_output(kept, x, i):
    kept.append(x * float(i))  # LEAK: one output a step, before and after attach


def main():
    print(f"ready {os.getpid()}", flush=True)
    x = torch.ones(N, device="cuda")
    kept = []
    pre_s = float(os.environ.get("FW_PRE_S", 0))
    t0 = time.monotonic()
    while len(kept) < PRE or time.monotonic() - t0 < pre_s:
        keep_output(kept, x, len(kept))
        time.sleep(0.05 if not pre_s else 0.5)
    pre_steps = len(kept)
    torch.cuda.synchronize()
    pre = {"allocated_before_attach": torch.cuda.memory_allocated(),
           "reserved_before_attach": torch.cuda.memory_reserved(),
           "kept_before_attach": pre_steps,
           "leaked_before_attach_s": round(time.monotonic() - t0, 1)}
    with open(os.environ["FW_PRE"] + ".tmp", "w") as f:
        json.dump(pre, f)
    os.rename(os.environ["FW_PRE"] + ".tmp", os.environ["FW_PRE"])
    fw_common.wait_for(os.environ["FW_GO"])
    for i in fw_common.steps(int(os.environ.get("FW_POST_STEPS", STEPS)), INTERVAL):
        keep_output(kept, x, pre_steps + i)
    torch.cuda.synchronize()
    fw_common.done(dict(pre, framework="torch " + torch.__version__,
                        memory_allocated=torch.cuda.memory_allocated(),
                        memory_reserved=torch.cuda.memory_reserved(),
                        kept_after_attach=len(kept) - pre_steps,
                        kept_bytes_after_attach=(len(kept) - pre_steps) * N * 4,
                        site="keep_output"))


if __name__ == "__main__":
    main()
