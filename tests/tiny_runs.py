"""A FedAvg run small enough for a test to train it several times: synthetic data, logistic
regression, 10 clients, 5 rounds of 2 local steps, on the CPU with the plain loop."""

from flkit.experiment import RunConfig

TINY_FEDAVG = RunConfig(
    method="fedavg",
    dataset="synthetic",
    model="logreg",
    num_clients=10,
    partition="natural",
    clients_per_round=3,
    batch_size=10,
    local_epochs=None,
    local_steps=2,
    rounds=5,
    seed=1,
    device="cpu",
    backend="loop",
    dataset_kwargs={"alpha": 0.5, "beta": 0.5, "num_clients": 10},
)
