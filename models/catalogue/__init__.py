"""Reading catalogues/ (the one loader), Hugging Face config.json files and the hub, and the training stacks' presets."""
