"""The platform's side of training jobs: start them (a local worker process or a Modal call) by module name, watch and settle them."""
