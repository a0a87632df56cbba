"""The chapters' instruments: plotting style and heatmaps, the architecture
diagram, attention probes, parameter tables and shape traces, ablations,
weight copying to and from PyTorch's own modules (interop), and running an
experiment over several seeds to show the spread (seeds), the peak memory
a call allocates (memory), timing a call (timing) and the name of the
machine a timing was measured on (machine).

None of it is part of the model; it is how the book looks inside one.
"""
