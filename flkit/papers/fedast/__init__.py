"""FedAST: federated asynchronous simultaneous training (notebook 03_fedast).

README.md describes the paper, our choices and what the notebook reproduces."""
