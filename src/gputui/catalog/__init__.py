"""The catalog: GPU and model datasheets (`specs`) and the weight / KV / VRAM arithmetic (`memory`).

It sits below every package that needs hardware or model figures (sim, telemetry, node,
workloads, the diagnosis) and imports none of them, so a corrected figure changes one line and no
import cycle can pass through it.
"""
