"""The screens: the live session, help, saved sessions, and the save/recover/confirm dialogs."""
