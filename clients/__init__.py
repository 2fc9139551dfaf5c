"""tether.clients"""
