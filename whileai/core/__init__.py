"""The bottom layer: data-root paths and operator settings, the named errors, the JSON codec and constants shared by the platform and the SDK. Imports nothing else of whileai."""
