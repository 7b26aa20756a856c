"""mixprec.cuda: what scripts ask before choosing a device. mixprec computes on CPUs only:
is_available() is False and there are no devices, so `device = torch.device("cuda" if
torch.cuda.is_available() else "cpu")` picks the CPU."""


def is_available():
    return False


def device_count():
    return 0
