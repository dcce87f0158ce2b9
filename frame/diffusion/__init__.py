"""frame.diffusion"""
