#!/usr/bin/env python3
"""A PyTorch training script that behaves well under `tide serve`.

It trains a small ResNet-style CNN on CIFAR-10 (torchvision, downloaded to
--data) or, with --synthetic, on random images (no download), and follows
tide's job protocol (docs/api.md, "Jobs"):

* GPUs: tide sets CUDA_VISIBLE_DEVICES; the script uses every visible GPU
  (DataParallel), or the CPU when there is none (fake GPUs, or a PyTorch
  built without CUDA such as Debian's python3-torch). It reports the
  replicas it really runs, and says so when they differ from $TIDE_GPUS.
* Data: CIFAR-10 needs torchvision; without it (Debian's python3-torch
  has none) the script says so and trains on synthetic data.
* A missing PyTorch exits with 78 (EX_CONFIG): tide fails the job at once
  instead of retrying it.
* Checkpoints: model, optimizer and the samples done go to
  $TIDE_CHECKPOINT_DIR every --checkpoint-every steps and when SIGTERM
  arrives (preemption, resize, cancellation); the script then exits with
  143. At start it resumes from the checkpoint, so a restart on a different
  number of GPUs continues where the last attempt stopped. DataLoader
  workers ignore SIGTERM, so that the main process can save first.
* Batch size: the one tide gives ($TIDE_LOCAL_BSZ samples per GPU,
  $TIDE_ACCUM_STEPS accumulated passes per step), which Pollux adapts at
  each launch for a job submitted with --max-batch-size; else
  --batch-size. The work is --steps steps of --batch-size samples, so a
  larger batch takes fewer steps; the learning rate scales linearly.
* Progress: every --report-every steps it POSTs a report to
  $TIDE_REPORT_URL with the bearer token $TIDE_REPORT_TOKEN (or appends it
  to $TIDE_REPORT_FILE): progress, throughput, the step and compute time on
  its replicas (the observations tide fits Pollux's goodput model to), and,
  with --grad-stats, gradient noise statistics.
* Exit code 0 when --steps steps are done.

Run it through tide, e.g. (from the repository's root):

    tide submit --gpus 2 --estimate 1h -- python3 examples/pytorch/train.py
    tide submit --name cifar --gpus 2 --min-gpus 1 --max-gpus 4 --batch-size 256 \
        --max-batch-size 2048 --estimate 30m -- python3 examples/pytorch/train.py --steps 5000 --grad-stats

The tests run it against a stand-in for PyTorch (testdata/torchstub) to
check the protocol above, and with the real PyTorch under a real tide
serve when python3-torch is installed (cmd/tide TestServePyTorch).
"""

import argparse
import json
import os
import signal
import sys
import time
import urllib.request

# Exit code 78 (EX_CONFIG) tells tide the job cannot run as configured:
# it fails at once instead of retrying (docs/api.md, "Exit codes").
EXIT_CONFIG = 78

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"train.py: cannot import PyTorch ({e}); install it (Debian: apt-get install python3-torch; "
          f"or pip install torch) for the interpreter {sys.executable}", file=sys.stderr, flush=True)
    sys.exit(EXIT_CONFIG)

STOP = False


def on_sigterm(signum, frame):
    # Only set a flag: the training loop checkpoints at the end of the step.
    global STOP
    STOP = True


def worker_ignores_sigterm(_worker_id):
    # tide signals the job's whole process group, DataLoader workers too.
    # A worker killed by SIGTERM makes PyTorch raise in the main process
    # before it can checkpoint; ignoring it lets the main process save and
    # exit, which ends its workers (SIGKILL after the grace period ends
    # everything anyway).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.skip = None
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.skip is None else self.skip(x)))


class Net(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.body = nn.Sequential(Block(32, 64, 2), Block(64, 128, 2), Block(128, 256, 2))
        self.head = nn.Linear(256, classes)

    def forward(self, x):
        x = self.body(self.stem(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def batches(args, device, size):
    """Yields (inputs, labels) of size samples forever."""
    if args.synthetic:
        g = torch.Generator().manual_seed(0)
        while True:
            x = torch.randn(size, 3, 32, 32, generator=g)
            y = torch.randint(0, 10, (size,), generator=g)
            yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    import torchvision
    import torchvision.transforms as T

    tf = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616))])
    ds = torchvision.datasets.CIFAR10(args.data, train=True, download=True, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=size, shuffle=True, drop_last=True,
                                         num_workers=args.workers, pin_memory=device.type == "cuda",
                                         worker_init_fn=worker_ignores_sigterm)
    while True:
        for x, y in loader:
            yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)


class Reporter:
    def __init__(self):
        self.url = os.environ.get("TIDE_REPORT_URL", "")
        self.token = os.environ.get("TIDE_REPORT_TOKEN", "")
        self.file = os.environ.get("TIDE_REPORT_FILE", "")
        self.warned = False

    def send(self, report):
        body = json.dumps(report).encode()
        try:
            if self.url:
                req = urllib.request.Request(self.url, data=body, method="POST", headers={
                    "Content-Type": "application/json", "Authorization": "Bearer " + self.token})
                urllib.request.urlopen(req, timeout=2).close()
            elif self.file:
                with open(self.file, "a") as f:
                    f.write(body.decode() + "\n")
        except Exception as e:  # a failed report must not fail training
            if not self.warned:
                print(f"train.py: progress report failed: {e}", file=sys.stderr, flush=True)
                self.warned = True


def save(path, model, opt, samples):
    tmp = path + ".tmp"
    state = model.module.state_dict() if isinstance(model, nn.DataParallel) else model.state_dict()
    torch.save({"model": state, "opt": opt.state_dict(), "samples": samples}, tmp)
    os.replace(tmp, path)  # atomic: a kill during the save keeps the old one


def grad_sqnorm(model):
    return sum(float(p.grad.detach().pow(2).sum()) for p in model.parameters() if p.grad is not None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=256,
                    help="global batch size the job is tuned for; --steps counts steps of it (tide may give another batch: $TIDE_BATCH_SIZE)")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--checkpoint-every", type=int, default=100)
    ap.add_argument("--report-every", type=int, default=10)
    ap.add_argument("--grad-stats", action="store_true", help="report gradient noise statistics (one extra backward pass per report)")
    ap.add_argument("--synthetic", action="store_true", help="random images instead of CIFAR-10")
    ap.add_argument("--data", default=os.path.expanduser("~/.cache/cifar10"))
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, on_sigterm)
    ckpt_dir = os.environ.get("TIDE_CHECKPOINT_DIR", ".")
    os.makedirs(ckpt_dir, exist_ok=True)
    ckpt = os.path.join(ckpt_dir, "checkpoint.pt")

    if not args.synthetic:
        try:
            import torchvision  # noqa: F401
        except ImportError:
            print("train.py: torchvision is not installed, so CIFAR-10 cannot be loaded: training on synthetic "
                  "data (random images) instead (pip install torchvision for CIFAR-10; --synthetic to choose it)",
                  flush=True)
            args.synthetic = True

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # The replicas really run: DataParallel over every visible GPU, else one
    # process on the CPU.
    replicas = torch.cuda.device_count() if device.type == "cuda" else 1
    given = int(os.environ.get("TIDE_GPUS", "0") or 0)
    if given and given != replicas:
        print(f"train.py: tide gave {given} GPU(s) but {replicas} replica(s) run "
              f"({'CUDA sees ' + str(replicas) + ' device(s)' if device.type == 'cuda' else 'no CUDA device: on the CPU'})",
              flush=True)
    # The batch: tide's ($TIDE_LOCAL_BSZ per GPU, $TIDE_ACCUM_STEPS extra
    # passes per optimizer step; a policy such as Pollux may adapt it at
    # each launch), else --batch-size split over the replicas. When fewer
    # replicas run than tide planned, each takes a larger share of tide's
    # global batch ($TIDE_BATCH_SIZE).
    accum = int(os.environ.get("TIDE_ACCUM_STEPS", "0"))
    local_bsz = int(os.environ.get("TIDE_LOCAL_BSZ", "0")) or max(args.batch_size // replicas, 1)
    tide_batch = int(os.environ.get("TIDE_BATCH_SIZE", "0"))
    if tide_batch and given and given != replicas:
        local_bsz = max(-(-tide_batch // (replicas * (accum + 1))), 1)
    per_pass = local_bsz * replicas
    batch = per_pass * (accum + 1)
    # Linear learning-rate scaling with the batch (Goyal et al. 2017);
    # Pollux itself uses AdaScale, which this script does not implement.
    lr = args.lr * batch / args.batch_size
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    # Work is counted in samples, so a larger batch needs fewer steps.
    total = args.steps * args.batch_size
    samples = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        for group in opt.param_groups:
            group["lr"] = lr
        samples = state["samples"]
    if replicas > 1:
        model = nn.DataParallel(model)
        replicas = len(model.device_ids)
    print(f"train.py: step {samples // args.batch_size} of {args.steps} on {replicas} replica(s) ({device.type}), batch {batch} "
          f"({local_bsz} per replica, {accum} accumulation steps, {'synthetic data' if args.synthetic else 'CIFAR-10'}) "
          f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')!r}, "
          f"attempt {os.environ.get('TIDE_ATTEMPT', '?')})", flush=True)

    rep = Reporter()
    data = batches(args, device, per_pass)
    t_iter = t_step = t_compute = 0.0
    n_timed = 0
    steps = 0
    model.train()
    while samples < total and not STOP:
        opt.zero_grad(set_to_none=True)
        t_start = time.perf_counter()
        for i in range(accum + 1):
            x, y = next(data)
            t0 = time.perf_counter()
            loss = F.cross_entropy(model(x), y) / (accum + 1)
            loss.backward()
            if device.type == "cuda":
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            t_compute += t1 - t0
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        t_step += t2 - t0  # the last pass and the optimizer step
        t_iter += t2 - t_start
        n_timed += 1
        steps += 1
        samples = min(samples + batch, total)
        if steps % args.checkpoint_every == 0:
            save(ckpt, model, opt, samples)
        if steps % args.report_every == 0 or samples == total:
            step = samples / args.batch_size
            report = {
                "step": step, "total_steps": args.steps,
                "throughput": batch * n_timed / max(t_iter, 1e-9),
                "step_time": t_step / n_timed, "compute_time": t_compute / (n_timed * (accum + 1)),
                "local_bsz": local_bsz, "replicas": replicas, "nodes": 1,
                "message": f"step {step:.0f}/{args.steps} loss {loss.item() * (accum + 1):.3f}",
            }
            if args.grad_stats:
                report.update(grad_stats(model, x, y, args.batch_size))
            rep.send(report)
            t_iter = t_step = t_compute = 0.0
            n_timed = 0
            print(report["message"], flush=True)

    save(ckpt, model, opt, samples)
    if STOP and samples < total:
        print(f"train.py: SIGTERM at step {samples // args.batch_size}: checkpointed, exiting", flush=True)
        sys.exit(143)
    print("train.py: done", flush=True)


def grad_stats(model, x, y, init_batch):
    """Estimates the gradient noise statistics (McCandlish et al. 2018) from
    the gradient of half the batch and of the whole batch: |G|^2, the true
    gradient's squared norm, and S = tr(Sigma), its per-sample variance.
    tide (as Pollux) wants the variance of a gradient over the initial batch
    size: S / init_batch."""
    b = x.shape[0]
    if b < 4:
        return {}
    small, big = b // 2, b
    norms = {}
    for n in (small, big):
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x[:n]), y[:n]).backward()
        norms[n] = grad_sqnorm(model)
    model.zero_grad(set_to_none=True)
    g2 = (big * norms[big] - small * norms[small]) / (big - small)
    s = (norms[small] - norms[big]) / (1 / small - 1 / big)
    return {"grad_sqr": max(g2, 0.0), "grad_var": max(s, 0.0) / init_batch}


if __name__ == "__main__":
    main()
