"""ResNet-50 training throughput on synthetic data, one process per GPU (or CPU process), DDP across them.

The model is the bottleneck ResNet-50 (3-4-6-3 blocks, 25.6 M parameters at 1000 classes) defined here,
trained with SGD on one fixed random batch per rank, like tf_cnn_benchmarks' synthetic mode used in
the reference documents (docs/sources.md): the number is compute plus gradient all-reduce, no input pipeline.

Launch with any of:
  torchrun --nproc_per_node=8 resnet50_bench.py            (RANK/WORLD_SIZE/LOCAL_RANK, env://)
  mpirun -np 16 -x MASTER_ADDR=node1 python3 resnet50_bench.py   (OMPI_COMM_WORLD_*)
  srun --ntasks=16 python3 resnet50_bench.py              (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID)
  python3 resnet50_bench.py                               (one process)

Rank 0 prints stable, parseable lines (module_utils/gpuforge_resnet50.py reads them):
  RESNET50 CONFIG key=value ...
  RESNET50 rank=R local_rank=L host=H device=cuda:0 device_name="..." imgs_per_sec=X elapsed_s=T
  RESNET50 RESULT world_size=N batch_size=B total_imgs_per_sec=X per_gpu=Y device=cuda precision=bf16
                  requested_precision=amp ...
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

# ---------------------------------------------------------------- model


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carries the stride, as in the torch/NVIDIA "v1.5" variant), 1x1 expand x4."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = None
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x):
        identity = x if self.shortcut is None else self.shortcut(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, first stride)

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        blocks, channels = [], 64
        for width, count, stride in self.STAGES:
            for index in range(count):
                blocks.append(Bottleneck(channels, width, stride if index == 0 else 1))
                channels = width * Bottleneck.expansion
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


# ---------------------------------------------------------------- launch environment


def _first_slurm_host() -> str | None:
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if nodelist:
        try:
            out = subprocess.run(
                ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30, check=True
            ).stdout.split()
            if out:
                return out[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return os.environ.get("SLURM_LAUNCH_NODE_IPADDR")


def detect_launch(master_addr: str | None, master_port: int) -> dict:
    """Rank, world size and local rank from torchrun, Open MPI or Slurm; exports the env:// variables."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        launcher, rank, world, local = "torchrun", env["RANK"], env["WORLD_SIZE"], env.get("LOCAL_RANK", "0")
    elif "OMPI_COMM_WORLD_RANK" in env:
        launcher = "mpirun"
        rank, world = env["OMPI_COMM_WORLD_RANK"], env["OMPI_COMM_WORLD_SIZE"]
        local = env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        launcher, rank, world, local = "srun", env["SLURM_PROCID"], env["SLURM_NTASKS"], env.get("SLURM_LOCALID", "0")
    else:
        launcher, rank, world, local = "single", "0", "1", "0"
    info = {"launcher": launcher, "rank": int(rank), "world_size": int(world), "local_rank": int(local)}
    if info["world_size"] > 1 and launcher != "torchrun":
        address = master_addr or env.get("MASTER_ADDR") or (_first_slurm_host() if launcher == "srun" else None)
        if not address:
            raise SystemExit(f"resnet50_bench: launched by {launcher} with {world} ranks: set MASTER_ADDR")
        os.environ["MASTER_ADDR"] = address
        os.environ.setdefault("MASTER_PORT", str(master_port))
        os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"] = rank, world, local
    return info


# ---------------------------------------------------------------- benchmark


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="ResNet-50 synthetic-data training throughput")
    parser.add_argument("--batch-size", type=int, default=64, help="images per rank per step")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--steps", type=int, default=50, help="timed steps")
    # amp: automatic mixed precision, bf16 autocast where supported (fp16 with loss scaling on GPUs without
    # bf16); auto: amp on GPU, fp32 on CPU; fp16/bf16 force one type.
    parser.add_argument("--precision", choices=["auto", "fp32", "amp", "fp16", "bf16"], default="auto")
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    parser.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto")
    parser.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--master-addr", default=None, help="rendezvous host for mpirun/srun launches")
    parser.add_argument("--master-port", type=int, default=29500)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def choose(args, launch: dict) -> tuple[torch.device, str, str]:
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if use_cuda:
        if not torch.cuda.is_available():
            raise SystemExit("resnet50_bench: --device cuda but torch sees no GPU")
        index = launch["local_rank"] % torch.cuda.device_count()
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    else:
        device = torch.device("cpu")
    precision = args.precision
    if precision == "auto":
        precision = "amp" if use_cuda else "fp32"
    if precision == "amp":
        precision = "bf16" if not use_cuda or torch.cuda.is_bf16_supported() else "fp16"
    if precision == "fp16" and not use_cuda:
        raise SystemExit("resnet50_bench: fp16 needs a GPU; use --precision bf16 or fp32 on CPU")
    backend = args.backend if args.backend != "auto" else ("nccl" if use_cuda else "gloo")
    return device, precision, backend


def format_fields(fields: dict) -> str:
    return " ".join(f"{key}={shlex.quote(str(value))}" for key, value in fields.items())


TEXT_BYTES = 64


def _text_tensor(text: str, device: torch.device) -> torch.Tensor:
    raw = text.encode("utf-8")[:TEXT_BYTES].ljust(TEXT_BYTES, b"\0")
    return torch.tensor(list(raw), dtype=torch.uint8, device=device)


def _tensor_text(tensor: torch.Tensor) -> str:
    return bytes(tensor.cpu().tolist()).rstrip(b"\0").decode("utf-8", "replace")


def gather_ranks(launch: dict, device: torch.device, device_name: str, elapsed: float, distributed: bool) -> list:
    """Every rank's timing, host and device on every rank (plain tensors: all_gather_object needs numpy)."""
    index = -1 if device.index is None else device.index
    numbers = torch.tensor(
        [float(launch["rank"]), float(launch["local_rank"]), float(index), elapsed], dtype=torch.float64, device=device
    )
    texts = torch.cat([_text_tensor(socket.gethostname(), device), _text_tensor(device_name, device)])
    if distributed:
        all_numbers = [torch.empty_like(numbers) for _rank in range(launch["world_size"])]
        all_texts = [torch.empty_like(texts) for _rank in range(launch["world_size"])]
        dist.all_gather(all_numbers, numbers)
        dist.all_gather(all_texts, texts)
    else:
        all_numbers, all_texts = [numbers], [texts]
    entries = []
    for values, text in zip(all_numbers, all_texts, strict=True):
        rank, local_rank, index, seconds = values.cpu().tolist()
        entries.append(
            {
                "rank": int(rank),
                "local_rank": int(local_rank),
                "host": _tensor_text(text[:TEXT_BYTES]),
                "device": "cpu" if index < 0 else f"cuda:{int(index)}",
                "device_name": _tensor_text(text[TEXT_BYTES:]),
                "elapsed": seconds,
                "elapsed_s": f"{seconds:.4f}",
            }
        )
    return entries


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if min(args.batch_size, args.steps, args.image_size) < 1 or args.warmup_steps < 0:
        raise SystemExit("resnet50_bench: batch size, steps and image size must be positive")
    launch = detect_launch(args.master_addr, args.master_port)
    device, precision, backend = choose(args, launch)
    distributed = launch["world_size"] > 1
    if distributed:
        dist.init_process_group(backend=backend, init_method="env://")
    torch.manual_seed(args.seed + launch["rank"])

    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = ResNet50(args.num_classes).to(device, memory_format=memory_format)
    if distributed:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True
        )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
    images = images.contiguous(memory_format=memory_format)
    labels = torch.randint(0, args.num_classes, (args.batch_size,), device=device)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    def step() -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        autocast = torch.autocast(device_type=device.type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
        with autocast:
            loss = loss_fn(model(images), labels)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if distributed:
            dist.barrier()

    model.train()
    for _step in range(args.warmup_steps):
        step()
    sync()
    start = time.perf_counter()
    for _step in range(args.steps):
        loss = step()
    sync()
    elapsed = time.perf_counter() - start
    final_loss = float(loss.detach().float().item())

    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    everyone = gather_ranks(launch, device, device_name, elapsed, distributed)
    for entry in everyone:
        entry["imgs_per_sec"] = f"{args.batch_size * args.steps / entry.pop('elapsed'):.2f}"
    if launch["rank"] == 0:
        world = launch["world_size"]
        # Synchronous data parallel: the cluster moves at the pace of its slowest rank.
        slowest = max(float(entry["elapsed_s"]) for entry in everyone)
        total = world * args.batch_size * args.steps / slowest
        print(
            "RESNET50 CONFIG "
            + format_fields(
                {
                    "launcher": launch["launcher"],
                    "world_size": world,
                    "backend": backend if distributed else "none",
                    "device": device.type,
                    "precision": precision,
                    "requested_precision": args.precision,
                    "batch_size": args.batch_size,
                    "image_size": args.image_size,
                    "warmup_steps": args.warmup_steps,
                    "steps": args.steps,
                    "channels_last": int(args.channels_last),
                    "torch": torch.__version__,
                }
            ),
            flush=True,
        )
        for entry in everyone:
            print("RESNET50 " + format_fields(entry), flush=True)
        print(
            "RESNET50 RESULT "
            + format_fields(
                {
                    "world_size": world,
                    "batch_size": args.batch_size,
                    "global_batch_size": world * args.batch_size,
                    "image_size": args.image_size,
                    "steps": args.steps,
                    "total_imgs_per_sec": f"{total:.2f}",
                    "per_gpu": f"{total / world:.2f}",
                    "device": device.type,
                    "device_name": device_name,
                    "precision": precision,
                    "requested_precision": args.precision,
                    "backend": backend if distributed else "none",
                    "launcher": launch["launcher"],
                    "elapsed_s": f"{slowest:.4f}",
                    "loss": "nan" if math.isnan(final_loss) else f"{final_loss:.4f}",
                }
            ),
            flush=True,
        )
    if distributed:
        # Every rank past the last collective before any tears its process group down: a rank that left early
        # aborted a lab sweep with "terminate called without an active exception" after its result was printed.
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: the communication library's C++ threads may still be unwinding, and a crash
    # there (SIGABRT) would turn a finished, printed run into a failed one.
    os._exit(code)
