"""frame.engine"""
