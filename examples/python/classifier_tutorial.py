"""PyTorch's "Training a Classifier" tutorial (pytorch.org/tutorials/beginner/blitz/
cifar10_tutorial.html, 1.13), ported by changing its imports: a Dataset subclass, a DataLoader
with num_workers=2 (worker processes), a Net written with F.relu and torch.flatten, SGD with
momentum, torch.device, torch.save / torch.load of the state_dict, torch.max(outputs.data, 1)
and the per-class accuracy. What else differs from the tutorial: Fashion-MNIST from Debian's
dataset-fashion-mnist instead of torchvision's CIFAR-10 download (nothing is downloaded; one
channel of 28x28, so the Net's first layer takes 1 channel and fc1 16 * 4 * 4 inputs), the
loss printed every --print-every batches, and the bf16 autocast region around the forward
(what this project is about; --no-autocast leaves it out, as the tutorial does).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/classifier_tutorial.py --epochs 2
"""
import argparse
import os
import tempfile

import mixprec as torch                                    # was: import torch
import mixprec.nn as nn                                    # was: import torch.nn as nn
import mixprec.nn.functional as F                          # was: import torch.nn.functional as F
import mixprec.optim as optim                              # was: import torch.optim as optim
from mixprec.utils.data import DataLoader, Dataset         # was: from torch.utils.data import ...
from mixprec.data import fashion_mnist                     # was: torchvision.datasets.CIFAR10

classes = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
           "Ankle boot")


class FashionMNIST(Dataset):
    """Images [1, 28, 28] normalised, and their labels, one sample at a time (as torchvision's
    datasets give them)."""

    def __init__(self, train):
        self.images, self.labels = fashion_mnist("train" if train else "test").arrays

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return torch.from_numpy(self.images[index]), int(self.labels[index])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 4 * 4, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)  # flatten all dimensions except batch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many batches (0: all)")
    parser.add_argument("--print-every", type=int, default=500)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--no-autocast", action="store_true")
    parser.add_argument("--path", default=os.path.join(tempfile.gettempdir(), "fashion_net.pth"))
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    print(device)
    trainset, testset = FashionMNIST(train=True), FashionMNIST(train=False)
    trainloader = DataLoader(trainset, batch_size=args.batch_size, shuffle=True, num_workers=args.num_workers)
    testloader = DataLoader(testset, batch_size=args.batch_size, shuffle=False, num_workers=args.num_workers)

    net = Net()
    net.to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)

    for epoch in range(args.epochs):  # loop over the dataset multiple times
        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            if args.max_steps and i == args.max_steps:
                break
            # get the inputs; data is a list of [inputs, labels]
            inputs, labels = data[0].to(device), data[1].to(device)
            # zero the parameter gradients
            optimizer.zero_grad()
            # forward + backward + optimize
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=not args.no_autocast):
                outputs = net(inputs)
                loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            # print statistics
            running_loss += loss.item()
            if i % args.print_every == args.print_every - 1:
                print(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / args.print_every:.3f}")
                running_loss = 0.0
    print("Finished Training")

    torch.save(net.state_dict(), args.path)
    net = Net()
    net.load_state_dict(torch.load(args.path))

    correct = 0
    total = 0
    # since we're not training, we don't need to calculate the gradients for our outputs
    with torch.no_grad():
        for data in testloader:
            images, labels = data
            # calculate outputs by running images through the network
            outputs = net(images)
            # the class with the highest energy is what we choose as prediction
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    print(f"Accuracy of the network on the 10000 test images: {100 * correct // total} %")

    # prepare to count predictions for each class
    correct_pred = {classname: 0 for classname in classes}
    total_pred = {classname: 0 for classname in classes}
    with torch.no_grad():
        for data in testloader:
            images, labels = data
            outputs = net(images)
            _, predictions = torch.max(outputs, 1)
            # collect the correct predictions for each class
            for label, prediction in zip(labels, predictions):
                if label == prediction:
                    correct_pred[classes[label]] += 1
                total_pred[classes[label]] += 1
    for classname, correct_count in correct_pred.items():
        accuracy = 100 * float(correct_count) / total_pred[classname]
        print(f"Accuracy for class: {classname:11s} is {accuracy:.1f} %")


if __name__ == "__main__":
    main()
