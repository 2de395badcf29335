class SGD:
    def __init__(self, params, lr, momentum=0, weight_decay=0):
        self.params = list(params)
        self.param_groups = [{"lr": lr, "momentum": momentum, "weight_decay": weight_decay}]
        self.steps = 0

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None

    def step(self):
        self.steps += 1

    def state_dict(self):
        return {"steps": self.steps, "param_groups": [dict(g) for g in self.param_groups]}

    def load_state_dict(self, state):
        self.steps = state["steps"]
        self.param_groups = [dict(g) for g in state["param_groups"]]
