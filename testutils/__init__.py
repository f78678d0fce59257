"""The conformance kit: prove a rule right, allocation-free and safe to reuse."""
