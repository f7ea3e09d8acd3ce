"""`flkit` command line: run one experiment, manage datasets, reproduce the notebooks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__
from .utils import add_quiet_argument, run_command

EPILOG = """examples:
  flkit run fedavg --dataset mnist --model lenet5 --clients 100 --partition dirichlet \\
      --alpha 0.5 --clients-per-round 10 --local-epochs 1 --batch-size 50 --lr 0.05 \\
      --rounds 20 --seed 0 --out runs/demo
  flkit run fedprox --mu 0.01 --dataset synthetic --model logreg --partition natural --clients 30
  flkit data list                       where each dataset is found
  flkit reproduce --preset smoke        run every notebook and write report.md / report.html
  flkit course student                  the notebooks without answers in student/, for study
  flkit course release course/release   student notebooks for a course (see docs/TEACHING.md)

Each command's --help lists its own options and examples; --quiet (-q) silences progress, --jobs
runs that many at a time (default 1) and --yes starts a costly run without asking, wherever a
command has them.

environment: FLKIT_DATA (data root, default data/ at the project root), FLKIT_MIRROR (read-only
offline mirror), FLKIT_RUNS (run cache, default runs/cache at the project root), FLKIT_DEVICE
(overrides device 'auto'), FLKIT_PRESET (preset for notebooks run without an explicit one),
FLKIT_THREADS (torch CPU threads per process; use 1 when several jobs share the cores)."""


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


# The model used when `flkit run` gets no --model: a small one that fits the dataset's input.
DEFAULT_MODELS = {
    "mnist": "cnn_mnist",
    "fmnist": "cnn_mnist",
    "femnist": "cnn_mnist",
    "cifar10": "cnn_cifar10",
    "cifar100": "cnn_cifar10",
    "svhn": "cnn_cifar10",
    "har": "mlp_har",
    "shakespeare": "lstm_shakespeare",
    "synthetic": "logreg",
}


def add_run_parser(sub) -> None:
    from .experiment import RunConfig

    d = RunConfig.__dataclass_fields__
    p = sub.add_parser(
        "run",
        help="train one federated run and write history.csv and config.json",
        description="Train one federated run. Results are cached by config: re-running "
        "the same command loads them (and says so); an interrupted run resumes.",
    )
    p.add_argument(
        "method",
        nargs="?",
        help="fedavg, fedprox, stc, ... (see `flkit run --list`; default: none, --list is shown)",
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="list methods, datasets, models and partitions (default: off)",
    )
    p.add_argument(
        "--dataset",
        default=d["dataset"].default,
        help="dataset name, see --list (default: %(default)s)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="model name, see --list (default: one that fits the dataset: "
        + ", ".join(f"{k} {v}" for k, v in DEFAULT_MODELS.items())
        + "; the choice is printed)",
    )
    p.add_argument(
        "--clients",
        type=int,
        default=d["num_clients"].default,
        help="number of clients (default: %(default)s)",
    )
    p.add_argument(
        "--partition",
        default=d["partition"].default,
        help="iid, dirichlet, shards, classes_per_client, natural (default: %(default)s)",
    )
    p.add_argument(
        "--alpha",
        type=float,
        help="Dirichlet concentration, with --partition dirichlet (default: none; needed there)",
    )
    p.add_argument(
        "--shards-per-client",
        type=int,
        help="shards per client, with --partition shards (default: the partition's, 2)",
    )
    p.add_argument(
        "--classes-per-client",
        type=int,
        help="classes per client, with --partition classes_per_client (default: the "
        "partition's, 2)",
    )
    p.add_argument(
        "--clients-per-round",
        type=int,
        default=d["clients_per_round"].default,
        help="clients sampled each round (default: %(default)s)",
    )
    p.add_argument(
        "--local-epochs",
        type=int,
        default=d["local_epochs"].default,
        help="local epochs per round (default: %(default)s; ignored with --local-steps)",
    )
    p.add_argument(
        "--local-steps",
        type=int,
        help="local SGD steps per round instead of epochs (default: none, epochs are used)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=d["batch_size"].default,
        help="local mini-batch size (default: %(default)s)",
    )
    p.add_argument(
        "--lr",
        type=float,
        default=d["lr"].default,
        help="client learning rate (default: %(default)s)",
    )
    p.add_argument(
        "--momentum",
        type=float,
        default=d["momentum"].default,
        help="client SGD momentum (default: %(default)s)",
    )
    p.add_argument(
        "--weight-decay",
        type=float,
        default=d["weight_decay"].default,
        help="client weight decay (default: %(default)s)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=d["rounds"].default,
        help="communication rounds (default: %(default)s)",
    )
    p.add_argument(
        "--eval-every",
        type=int,
        default=d["eval_every"].default,
        help="test the global model every N rounds (default: %(default)s)",
    )
    p.add_argument(
        "--per-client-eval",
        action="store_true",
        help="also report per-client accuracies (default: off)",
    )
    p.add_argument("--mu", type=float, help="FedProx proximal weight (default: the method's)")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other method hyperparameter, e.g. --param p=0.1 (repeatable; default: "
        "the method's own values)",
    )
    p.add_argument(
        "--train-subset",
        type=int,
        help="use a class-stratified subset of the training set of this size "
        "(default: the whole set)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=d["seed"].default,
        help="seed of every random choice of the run: partition, initial weights, client "
        "sampling, batches (default: %(default)s)",
    )
    p.add_argument(
        "--device",
        default="auto",
        help="auto (cuda when available), cpu, cuda, cuda:1 (default: %(default)s)",
    )
    p.add_argument(
        "--backend",
        default="auto",
        help="engine backend: auto (the fastest measured on this machine, recorded in the run's "
        "config), wide, vmap, loop, compiled, graph (CUDA only); pin one for machine-independent "
        "numbers (default: %(default)s)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="folder for history.csv and config.json (default: none, only the run cache)",
    )
    p.add_argument(
        "--cache",
        type=Path,
        help="run cache root (default: $FLKIT_RUNS, else runs/cache at the project root)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=int,
        metavar="N",
        help="write a checkpoint every N rounds; an interrupted run resumes from the last one "
        "with the numbers of a run never stopped (default: none, checkpoints by time)",
    )
    p.add_argument(
        "--checkpoint-seconds",
        type=float,
        default=60.0,
        metavar="S",
        help="without --checkpoint-every, write a checkpoint whenever S seconds of training "
        "have passed since the last one (default: %(default)s)",
    )
    add_quiet_argument(p, "no progress bar (default: off)")
    p.set_defaults(func=cmd_run)


def cmd_run(args) -> int:
    from . import data, methods, models
    from .experiment import RunConfig, is_cached, resolve_backend, run, run_folder
    from .store import save_frame, save_json

    if args.list or not args.method:
        print("methods:   ", ", ".join(methods.names()))
        print("datasets:  ", ", ".join(data.DATASETS))
        print("models:    ", ", ".join(models.MODELS))
        print("partitions:", ", ".join(data.partition.SCHEMES))
        return 0 if args.list else 2
    model = args.model
    if model is None:
        model = DEFAULT_MODELS.get(args.dataset, RunConfig.__dataclass_fields__["model"].default)
        print(f"no --model given: using {model} for dataset {args.dataset} (--model picks another)")
    pkw = {
        k: v
        for k, v in (
            ("alpha", args.alpha),
            ("shards_per_client", args.shards_per_client),
            ("classes", args.classes_per_client),
        )
        if v is not None
    }
    mp = {}
    if args.mu is not None:
        mp["mu"] = args.mu
    for item in args.param:
        if "=" not in item:
            raise SystemExit(f"--param {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        mp[k] = _value(v)
    dkw = {"train_subset": args.train_subset} if args.train_subset is not None else {}
    cfg = RunConfig(
        method=args.method,
        dataset=args.dataset,
        model=model,
        num_clients=args.clients,
        partition=args.partition,
        partition_kwargs=pkw,
        clients_per_round=args.clients_per_round,
        local_epochs=None if args.local_steps is not None else args.local_epochs,
        local_steps=args.local_steps,
        batch_size=args.batch_size,
        lr=args.lr,
        momentum=args.momentum,
        weight_decay=args.weight_decay,
        rounds=args.rounds,
        eval_every=args.eval_every,
        per_client_eval=args.per_client_eval,
        method_params=mp,
        dataset_kwargs=dkw,
        seed=args.seed,
        device=args.device,
        backend=args.backend,
    )
    # The folder experiment.run reads, named by the config with "auto" resolved to the backend
    # that will run: a finished run there is loaded, not trained.
    resolved, setup, _ = resolve_backend(cfg, args.cache)
    cached = is_cached(resolved, args.cache)
    if cached:
        folder = run_folder(resolved, args.cache)
        print(f"loaded from cache (folder {folder}); delete the folder to train again")
    result = run(
        cfg,
        out_dir=args.cache,
        progress=not args.quiet,
        setup=setup,
        checkpoint_every=args.checkpoint_every,
        checkpoint_seconds=args.checkpoint_seconds,
    )
    if args.out:
        save_frame(args.out / "history.csv", result.history)
        save_json(args.out / "config.json", result.config.key())  # the backend that ran
    last = result.history.dropna(subset=["test_accuracy"]).iloc[-1]
    print(
        f"{cfg.method}: round {int(last['round'])} test accuracy {last['test_accuracy']:.4f} "
        f"({'cached ' if cached else ''}run folder {result.run_dir}"
        f"{', written to ' + str(args.out) if args.out else ''})"
    )
    return 0


def _register_data(sub) -> None:
    from .data.admin import register_cli

    register_cli(sub)


def _register_reproduce(sub) -> None:
    from .reproduce.command import register_cli

    register_cli(sub)


def _register_sweep(sub) -> None:
    from .reproduce.sweep import register_cli

    register_cli(sub)


def _register_course(sub) -> None:
    from .course.command import register_cli

    register_cli(sub)


# Each sub-command's parser is built by its own module, imported only when the parser is: a
# `flkit run` process never imports the notebook runner, the data admin or the course tools.
COMMANDS = {
    "run": add_run_parser,
    "data": _register_data,
    "reproduce": _register_reproduce,
    "sweep": _register_sweep,
    "course": _register_course,
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `flkit` parser with every sub-command, or with ``only`` that one (what `main` builds
    when the command line names it first: the other sub-commands' modules are not imported)."""
    parser = argparse.ArgumentParser(
        prog="flkit",
        description="flkit: federated-learning workbook tools",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"flkit {__version__}",
        help="show the version and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    for name, register in COMMANDS.items():
        if only is None or name == only:
            register(sub)
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # argparse reads the sub-command's arguments with that sub-command's parser alone, so a
    # parser holding only it parses them (and reports their errors) as the full one does
    only = argv[0] if argv and argv[0] in COMMANDS else None
    return run_command(build_parser(only), argv)


if __name__ == "__main__":
    sys.exit(main())
