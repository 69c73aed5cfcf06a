"""Stack settings: one typed, validated object read once from the stack file.

The model is model/ (`Settings` in model/stack_file.py, one module per section), the reader loader.py (`load_settings`,
`settings_from_mapping`), the error errors.py (`SettingsError`, `Problem`); import each from
its module. This file imports nothing, as the cloud packages' do, so importing any module of the
package never runs the loader and the rules first (a circle through every cloud's rules).
"""
