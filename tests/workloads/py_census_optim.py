# SPDX-License-Identifier: BSD-2-Clause
"""Real training's holders: a torch.nn model (its parameters in the modules' _parameters,
an OrderedDict up to PyTorch 2.0) and an Adam optimizer after a step (its state a
defaultdict keyed by the Parameters, holding exp_avg and exp_avg_sq: twice the model).
Writes each parameter's and each state tensor's storage as JSON, says "ready PID", waits
for "go" and says "ok"."""
import argparse
import json
import os
import sys

import torch


def storage(t):
    s = t.storage()
    return {"data": s.data_ptr(), "bytes": s.nbytes()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--truth", required=True)
    args = ap.parse_args()
    g = globals()
    g["model"] = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(),
                                     torch.nn.Linear(8, 2))
    g["opt"] = torch.optim.Adam(g["model"].parameters(), lr=1e-3)
    loss = g["model"](torch.ones(4, 16)).sum()
    loss.backward()
    g["opt"].step()
    g["opt"].zero_grad(set_to_none=True)
    del loss
    truth = {"params": {}, "state": {}}
    for name, p in g["model"].named_parameters():
        truth["params"][name] = storage(p)
        for k, v in g["opt"].state[p].items():
            if torch.is_tensor(v):
                truth["state"][f"{name}.{k}"] = storage(v)
    with open(args.truth, "w") as f:
        json.dump(truth, f)
    print(f"ready {os.getpid()}", flush=True)
    if sys.stdin.readline().strip() != "go":
        sys.exit("py_census_optim: expected 'go'")
    print("ok", flush=True)


if __name__ == "__main__":
    main()
