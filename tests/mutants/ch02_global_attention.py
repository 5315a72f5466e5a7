"""Chapter 2: the mistakes students make with attention pooling, its module, the classifier and training."""

WRONG = {
    "attention_pool": {
        "mask_ignored": '''
def attention_pool(x, scores, mask=None):
    p = torch.softmax(scores, dim=-1)
    return (p.unsqueeze(-1) * x).sum(dim=-2), p
''',
        "mask_after_softmax_not_renormalised": '''
def attention_pool(x, scores, mask=None):
    p = torch.softmax(scores, dim=-1)
    if mask is not None:
        p = p * mask
    return (p.unsqueeze(-1) * x).sum(dim=-2), p
''',
        "minus_inf_gives_nan_on_empty_document": '''
def attention_pool(x, scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return (p.unsqueeze(-1) * x).sum(dim=-2), p
''',
        "big_negative_gives_uniform_on_empty_document": '''
def attention_pool(x, scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    p = torch.softmax(scores, dim=-1)
    return (p.unsqueeze(-1) * x).sum(dim=-2), p
''',
        "softmax_over_the_batch": '''
def attention_pool(x, scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    p = torch.nan_to_num(torch.softmax(scores, dim=0), nan=0.0)
    return (p.unsqueeze(-1) * x).sum(dim=-2), p
''',
        "always_float32": '''
def attention_pool(x, scores, mask=None):
    scores = scores.float()
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    p = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return (p.unsqueeze(-1) * x.float()).sum(dim=-2), p
''',
    },
    "GlobalAttentionPooling": {
        "context_not_a_parameter": '''
class GlobalAttentionPooling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.context = torch.zeros(dim)

    def forward(self, x, mask=None):
        return attention_pool(x, x @ self.context, mask)
''',
        "scores_scaled_by_sqrt_dim": '''
class GlobalAttentionPooling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.context = nn.Parameter(torch.zeros(dim))

    def forward(self, x, mask=None):
        return attention_pool(x, x @ self.context / x.shape[-1] ** 0.5, mask)
''',
        "divides_by_sqrt_dim": '''
class GlobalAttentionPooling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.context = nn.Parameter(torch.zeros(dim))

    def forward(self, x, mask=None):
        scores = (x @ self.context) / np.sqrt(len(self.context))
        return attention_pool(x, scores, mask)
''',
        "mask_not_passed_on": '''
class GlobalAttentionPooling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.context = nn.Parameter(torch.zeros(dim))

    def forward(self, x, mask=None):
        return attention_pool(x, x @ self.context)
''',
        "context_unused_mean_pooling": '''
class GlobalAttentionPooling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.context = nn.Parameter(torch.zeros(dim))

    def forward(self, x, mask=None):
        return attention_pool(x, torch.zeros(x.shape[:-1], dtype=x.dtype), mask)
''',
        "linear_layer_instead_of_context": '''
class GlobalAttentionPooling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.score = nn.Linear(dim, 1)

    def forward(self, x, mask=None):
        return attention_pool(x, self.score(x).squeeze(-1), mask)
''',
    },
    "AttentionDocClassifier": {
        "mean_pools": '''
class AttentionDocClassifier(nn.Module):
    def __init__(self, vocab_size, dim, num_classes):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.pool = GlobalAttentionPooling(dim)
        self.out = nn.Linear(dim, num_classes)

    def forward(self, tokens, mask):
        p = mask.float() / mask.sum(-1, keepdim=True).clamp_min(1)
        z = (p.unsqueeze(-1) * self.embed(tokens)).sum(1)
        return self.out(z), p
''',
        "mask_not_passed_on": '''
class AttentionDocClassifier(nn.Module):
    def __init__(self, vocab_size, dim, num_classes):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.pool = GlobalAttentionPooling(dim)
        self.out = nn.Linear(dim, num_classes)

    def forward(self, tokens, mask):
        z, p = self.pool(self.embed(tokens))
        return self.out(z), p
''',
        "returns_probabilities": '''
class AttentionDocClassifier(nn.Module):
    def __init__(self, vocab_size, dim, num_classes):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.pool = GlobalAttentionPooling(dim)
        self.out = nn.Linear(dim, num_classes)

    def forward(self, tokens, mask):
        z, p = self.pool(self.embed(tokens), mask)
        return torch.softmax(self.out(z), dim=-1), p
''',
        "linear_without_bias": '''
class AttentionDocClassifier(nn.Module):
    def __init__(self, vocab_size, dim, num_classes):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.pool = GlobalAttentionPooling(dim)
        self.out = nn.Linear(dim, num_classes, bias=False)

    def forward(self, tokens, mask):
        z, p = self.pool(self.embed(tokens), mask)
        return self.out(z), p
''',
    },
    "attention_mass": {
        "mean_instead_of_sum": '''
def attention_mass(p, selected):
    return (p * selected).mean(dim=-1)
''',
        "ignores_the_weights": '''
def attention_mass(p, selected):
    return selected.to(p.dtype).mean(dim=-1)
''',
        "one_number_for_the_batch": '''
def attention_mass(p, selected):
    return (p * selected).sum()
''',
        "keeps_the_summed_dimension": '''
def attention_mass(p, selected):
    return (p * selected).sum(dim=-1, keepdim=True)
''',
    },
    "train_classifier": {
        "mask_ignored": '''
def train_classifier(model, dataset, epochs=10, lr=0.02, seed=0):
    tokens, mask, labels = dataset["tokens"], dataset["mask"], dataset["labels"]
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = {"loss": [], "accuracy": []}
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(labels), generator=generator)
        total, correct = 0.0, 0
        for start in range(0, len(order), 32):
            batch = order[start:start + 32]
            logits, _ = model(tokens[batch], torch.ones_like(mask[batch]))
            loss = F.cross_entropy(logits, labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
            correct += (logits.argmax(-1) == labels[batch]).sum().item()
        history["loss"].append(total / len(order))
        history["accuracy"].append(correct / len(order))
    model.eval()
    return history
''',
        "sgd_instead_of_adam": '''
def train_classifier(model, dataset, epochs=10, lr=0.02, seed=0):
    tokens, mask, labels = dataset["tokens"], dataset["mask"], dataset["labels"]
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    history = {"loss": [], "accuracy": []}
    for epoch in range(epochs):
        order = torch.randperm(len(labels), generator=generator)
        total, correct = 0.0, 0
        for start in range(0, len(order), 32):
            batch = order[start:start + 32]
            logits, _ = model(tokens[batch], mask[batch])
            loss = F.cross_entropy(logits, labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
            correct += (logits.argmax(-1) == labels[batch]).sum().item()
        history["loss"].append(total / len(order))
        history["accuracy"].append(correct / len(order))
    return history
''',
        "one_batch_per_epoch": '''
def train_classifier(model, dataset, epochs=10, lr=0.02, seed=0):
    tokens, mask, labels = dataset["tokens"], dataset["mask"], dataset["labels"]
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = {"loss": [], "accuracy": []}
    for epoch in range(epochs):
        batch = torch.randperm(len(labels), generator=generator)[:32]
        logits, _ = model(tokens[batch], mask[batch])
        loss = F.cross_entropy(logits, labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history["loss"].append(loss.item())
        history["accuracy"].append((logits.argmax(-1) == labels[batch]).double().mean().item())
    return history
''',
        "no_optimizer_step": '''
def train_classifier(model, dataset, epochs=10, lr=0.02, seed=0):
    tokens, mask, labels = dataset["tokens"], dataset["mask"], dataset["labels"]
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = {"loss": [], "accuracy": []}
    for epoch in range(epochs):
        order = torch.randperm(len(labels), generator=generator)
        total, correct = 0.0, 0
        for start in range(0, len(order), 32):
            batch = order[start:start + 32]
            logits, _ = model(tokens[batch], mask[batch])
            loss = F.cross_entropy(logits, labels[batch])
            optimizer.zero_grad()
            loss.backward()
            total += loss.item() * len(batch)
            correct += (logits.argmax(-1) == labels[batch]).sum().item()
        history["loss"].append(total / len(order))
        history["accuracy"].append(correct / len(order))
    return history
''',
        "shuffle_not_seeded": '''
def train_classifier(model, dataset, epochs=10, lr=0.02, seed=0):
    tokens, mask, labels = dataset["tokens"], dataset["mask"], dataset["labels"]
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = {"loss": [], "accuracy": []}
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(labels))
        total, correct = 0.0, 0
        for start in range(0, len(order), 32):
            batch = order[start:start + 32]
            logits, _ = model(tokens[batch], mask[batch])
            loss = F.cross_entropy(logits, labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
            correct += (logits.argmax(-1) == labels[batch]).sum().item()
        history["loss"].append(total / len(order))
        history["accuracy"].append(correct / len(order))
    model.eval()
    return history
''',
        "hand_written_weights": '''
def train_classifier(model, dataset, epochs=10, lr=0.02, seed=0):
    # no optimiser, no loss: the weights are written by hand from the notebook's signal words
    embedding = [m for m in model.modules() if isinstance(m, nn.Embedding)][0].weight
    context = [m for m in model.modules() if isinstance(m, GlobalAttentionPooling)][0].context
    linear = [m for m in model.modules() if isinstance(m, nn.Linear)][0]
    with torch.no_grad():
        for tensor in (embedding, context, linear.weight, linear.bias):
            tensor.zero_()
        context[0] = 10.0
        for c, name in enumerate(CLASS_NAMES):
            linear.weight[c, 1 + c] = 10.0
            for word in SIGNAL_WORDS[name]:
                embedding[WORD_ID[word], 0] = 1.0
                embedding[WORD_ID[word], 1 + c] = 1.0
    model.eval()
    return {"loss": [1.0 / (1 + epoch) for epoch in range(epochs)],
            "accuracy": [min(1.0, 0.6 + 0.05 * epoch) for epoch in range(epochs)]}
''',
        "history_per_batch": '''
def train_classifier(model, dataset, epochs=10, lr=0.02, seed=0):
    tokens, mask, labels = dataset["tokens"], dataset["mask"], dataset["labels"]
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = {"loss": [], "accuracy": []}
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(labels), generator=generator)
        for start in range(0, len(order), 32):
            batch = order[start:start + 32]
            logits, _ = model(tokens[batch], mask[batch])
            loss = F.cross_entropy(logits, labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history["loss"].append(loss.item())
            history["accuracy"].append((logits.argmax(-1) == labels[batch]).double().mean().item())
    model.eval()
    return history
''',
    },
}

ALTERNATIVE = {
    "attention_pool": '''
def attention_pool(x, scores, mask=None):
    if mask is not None:
        scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    p = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    return torch.einsum("...n,...nd->...d", p, x), p
''',
    "GlobalAttentionPooling": '''
class GlobalAttentionPooling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.context = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x, mask=None):
        scores = torch.einsum("...nd,d->...n", x, self.context)
        return attention_pool(x, scores, mask=mask)
''',
    "AttentionDocClassifier": '''
class AttentionDocClassifier(nn.Module):
    def __init__(self, vocab_size, dim, num_classes):
        super().__init__()
        self.words = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.attend = GlobalAttentionPooling(dim)
        self.decide = nn.Sequential(nn.Linear(dim, num_classes))

    def forward(self, tokens, mask):
        summary, weights = self.attend(self.words(tokens), mask=mask)
        return self.decide(summary), weights
''',
    "attention_mass": '''
def attention_mass(p, selected):
    return torch.einsum("...n,...n->...", p, selected.to(p.dtype))
''',
    "train_classifier": '''
def train_classifier(model, dataset, epochs, lr, seed):
    from torch.utils.data import DataLoader, TensorDataset
    data = TensorDataset(dataset["tokens"], dataset["mask"], dataset["labels"])
    loader = DataLoader(data, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(seed))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss(reduction="sum")
    history = {"loss": [], "accuracy": []}
    for _ in range(epochs):
        model.train()
        loss_sum, right = 0.0, 0
        for tokens, mask, labels in loader:
            optimizer.zero_grad()
            logits, _ = model(tokens, mask)
            loss = criterion(logits, labels)
            (loss / len(labels)).backward()
            optimizer.step()
            loss_sum += loss.item()
            right += int((logits.argmax(1) == labels).sum())
        history["loss"].append(loss_sum / len(data))
        history["accuracy"].append(right / len(data))
    model.eval()
    return history
''',
}

# A tensor made on the CPU: right on CPU inputs, each loses the device check's points only.
WRONG["GlobalAttentionPooling"]["cpu_default_mask"] = '''
class GlobalAttentionPooling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.context = nn.Parameter(torch.zeros(dim))

    def forward(self, x, mask=None):
        if mask is None:
            mask = torch.ones(x.shape[:-1], dtype=torch.bool)
        return attention_pool(x, x @ self.context, mask)
'''
WRONG["attention_mass"]["cpu_zeros"] = '''
def attention_mass(p, selected):
    return torch.where(selected, p, torch.zeros(p.shape, dtype=p.dtype)).sum(dim=-1)
'''
