"""Pure view builders: core state in, frozen view dataclasses out, for widgets to render."""
