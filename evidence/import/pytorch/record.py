"""Two variants of one training step, profiled by PyTorch's profiler (Kineto) on a GPU:
fp32 matrix products (`fp32`) and TF32 ones (`tf32`, torch.backends.cuda.matmul.allow_tf32).
The model is an MLP of 4 linear layers of 4096 units (batch 4096) with an SGD step.
Each trace file holds one profiled step; the variants alternate, step after step, so
the i-th trace of each side were recorded next to each other (import --paired-by-order).

    python3 record.py OUT_DIR [PAIRS]
writes OUT_DIR/fp32/step_<i>.json.gz and OUT_DIR/tf32/step_<i>.json.gz.
"""
import gzip, os, shutil, sys
import torch
from torch.profiler import ProfilerActivity, profile, record_function

out = sys.argv[1]
pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 6
torch.manual_seed(0)
dev = torch.device("cuda")
layers = [torch.nn.Linear(4096, 4096) for _ in range(4)]
model = torch.nn.Sequential(*[m for l in layers for m in (l, torch.nn.ReLU())]).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(4096, 4096, device=dev)
y = torch.randn(4096, 4096, device=dev)


def step():
    with record_function("train_step"):
        opt.zero_grad(set_to_none=True)
        with record_function("forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
    torch.cuda.synchronize()


for variant in ("fp32", "tf32"):
    os.makedirs(f"{out}/{variant}", exist_ok=True)
for tf32 in (False, True, False, True):  # warm both paths up
    torch.backends.cuda.matmul.allow_tf32 = tf32
    step()
for i in range(pairs):
    order = ("fp32", "tf32") if i % 2 == 0 else ("tf32", "fp32")
    for variant in order:
        torch.backends.cuda.matmul.allow_tf32 = variant == "tf32"
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
        path = f"{out}/{variant}/step_{i}.json"
        prof.export_chrome_trace(path)
        with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
            shutil.copyfileobj(f, g)
        os.remove(path)
print(torch.__version__, torch.cuda.get_device_name(0))
